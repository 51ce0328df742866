"""use_sim_time: passes follow /clock (as in Gazebo), unstamped results get sim time."""

import time

from rosgraph_msgs.msg import Clock

from robot_memory.consolidation import EXECUTION_RESULT
from robot_memory.store import MemoryStore

from ros.conftest import wait_until
from ros.test_governance import wait_active


def publish_clock(publisher, seconds: float) -> None:
    msg = Clock()
    msg.clock.sec, msg.clock.nanosec = int(seconds), int((seconds % 1) * 1e9)
    publisher.publish(msg)


def test_consolidation_follows_sim_time(probe, start_stack, certified_hash, db_url):
    clock = probe.create_publisher(Clock, "/clock", 10)
    start_stack(use_sim_time=True, period_s=30.0)
    probe.wait_identity()
    # The pass timer exists only once the consolidator is active: let it see every jump.
    wait_active(probe, "consolidator")
    probe.wait_logger()
    wait_until(lambda: clock.get_subscription_count() >= 3, 20, "nodes on /clock")
    for _ in range(10):
        publish_clock(clock, 500.0)
        time.sleep(0.05)
    probe.publish_result(stamp_s=0)  # unstamped: the logger stamps it with sim time
    for i in range(4):
        probe.publish_result(stamp_s=490 + i)
    part = MemoryStore(db_url).partition(certified_hash)
    wait_until(lambda: part.count_events(EXECUTION_RESULT) == 5, 20, "5 results stored")

    time.sleep(1.5)  # wall time passes, sim time stands still: no pass may run
    assert part.facts() == []

    for step in range(1, 80):  # 40 sim seconds: past one 30 s period
        publish_clock(clock, 500.0 + step * 0.5)
        time.sleep(0.01)
    fact = probe.wait_fact(lambda f: f.n_observations == 5, timeout=20)
    stamps = sorted(e.stamp_ns for e in part.events([EXECUTION_RESULT]))
    assert stamps[:4] == [490e9, 491e9, 492e9, 493e9]
    assert 500e9 <= stamps[4] < 541e9
    assert fact.last_updated.sec == stamps[4] // 10**9

"""use_sim_time: nothing comes up before /clock does, passes follow /clock (as in
Gazebo), unstamped results get sim time."""

import threading
import time

from rosgraph_msgs.msg import Clock

from lifecycle_msgs.msg import State

from robot_memory.consolidation import EXECUTION_RESULT
from robot_memory.msg import ExecutionResult, IdentityStatus
from robot_memory.srv import RecordEvent
from robot_memory.store import MemoryStore

from ros.conftest import wait_until
from ros.test_governance import lifecycle_state, wait_active


def publish_clock(publisher, seconds: float) -> None:
    msg = Clock()
    msg.clock.sec, msg.clock.nanosec = int(seconds), int((seconds % 1) * 1e9)
    publisher.publish(msg)


class ClockAt:
    """Publishes /clock at one time, 20 times a second, until stopped (as a paused
    simulation does), so nodes that subscribe late see it too."""

    def __init__(self, publisher, seconds: float):
        self.publisher, self.seconds = publisher, seconds
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.wait(0.05):
            publish_clock(self.publisher, self.seconds)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(5)


def test_without_clock_nothing_comes_up_and_then_everything_does(
        probe, start_stack, certified_hash, db_url):
    clock = probe.create_publisher(Clock, "/clock", 10)
    stack = start_stack(use_sim_time=True, period_s=30.0)
    assert probe.wait_identity().state == IdentityStatus.VERIFIED
    wait_until(lambda: "no /clock" in probe.statuses.get("manifest_verifier", (0, ""))[1], 30,
               lambda: f"the verifier's WARN ({probe.statuses})")
    level, message = probe.statuses["manifest_verifier"]
    assert level == 1 and "memory nodes held: use_sim_time is true" in message
    answer = probe.call(RecordEvent, "record_event", RecordEvent.Request(
        result=ExecutionResult(skill_id="manipulation.grasp", target_class="glass_cup",
                               environment="lab", success=True)))
    assert not answer.accepted and answer.reason_code == "inactive"
    for node in ("episodic_logger", "consolidator", "grounding_server"):
        assert lifecycle_state(probe, node) == State.PRIMARY_STATE_UNCONFIGURED
    ticking = ClockAt(clock, 700.0)
    try:
        wait_active(probe, "episodic_logger")
        probe.wait_logger()
        probe.publish_result(stamp_s=0)  # unstamped: stamped with the sim time it got
        part = MemoryStore(db_url).partition(certified_hash)
        wait_until(lambda: part.count_events(EXECUTION_RESULT) == 1, 20, "the result stored")
        [event] = part.events([EXECUTION_RESULT])
        assert event.stamp_ns == 700 * 10**9
    finally:
        ticking.stop()
    assert "holding the memory nodes: use_sim_time is true" in stack.log_path.read_text()


def test_consolidation_follows_sim_time(probe, start_stack, certified_hash, db_url):
    clock = probe.create_publisher(Clock, "/clock", 10)
    start_stack(use_sim_time=True, period_s=30.0)
    probe.wait_identity()
    # Nothing comes up before the clock; the pass timer exists only once the consolidator
    # is active: let it see every jump after that.
    ticking = ClockAt(clock, 500.0)
    try:
        wait_active(probe, "consolidator")
        wait_active(probe, "episodic_logger")
        probe.wait_logger()
        wait_until(lambda: clock.get_subscription_count() >= 3, 20, "nodes on /clock")
    finally:
        ticking.stop()
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

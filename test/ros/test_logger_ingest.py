"""The logger under real processes: record_event answers from startup, and a flood of
results from another process is stored or counted by cause, exactly."""

import json
import subprocess
import sys

from robot_memory.event_kinds import EXECUTION_RESULT
from robot_memory.msg import IdentityStatus
from robot_memory.srv import RecordEvent
from robot_memory.store import MemoryStore

from ros.conftest import wait_until
from ros.test_governance import record, result

FLOOD_PUBLISHER = """
import json, sys, time, rclpy
from robot_memory.msg import ExecutionResult, KeyValue
from robot_memory.ros.matching import wait_for_subscriber
from robot_memory.ros.qos import EXECUTION_RESULTS_QOS
rclpy.init()
node = rclpy.create_node("flooding_skill", namespace=sys.argv[1])
publisher = node.create_publisher(ExecutionResult, "execution_results", EXECUTION_RESULTS_QOS)
assert wait_for_subscriber(publisher, 60), "the logger did not subscribe"
sent = refused = 0
for i in range(int(sys.argv[2])):  # as fast as this process can
    msg = ExecutionResult(skill_id="manipulation.grasp", target_class="glass_cup",
                          environment="sim", success=i % 4 != 0, intent_id=f"flood-{i}",
                          failure_reason="" if i % 4 else "slipped")
    msg.parameters = [KeyValue(key="force_n", value=float(i % 30))]
    msg.header.stamp.sec = 1000 + i
    try:
        publisher.publish(msg)
        sent += 1
    except Exception:  # the publisher's own history is full: never sent
        refused += 1
time.sleep(3.0)  # reliable: stay until the samples are acknowledged
print(json.dumps({"sent": sent, "refused_by_publisher": refused}), flush=True)
node.destroy_node()
rclpy.shutdown()
"""


def test_record_event_answers_inactive_with_the_reason_until_active(probe, start_stack):
    start_stack(certified_hash="0" * 64)  # a wrong certified hash: never activated
    assert probe.wait_identity().state == IdentityStatus.MISMATCH
    answer = wait_until(lambda: (a := record(probe, result(5))) and "MISMATCH" in a.reason
                        and a, 30, "record_event naming the mismatch")
    assert not answer.accepted
    assert answer.reason_code == RecordEvent.Response.REASON_INACTIVE
    assert answer.reason.startswith("inactive: identity MISMATCH")


def test_a_flood_from_another_process_is_stored_or_counted_exactly(probe, start_stack,
                                                                   certified_hash, db_url):
    stack = start_stack()
    probe.wait_identity()
    probe.wait_logger()
    flood = subprocess.run([sys.executable, "-c", FLOOD_PUBLISHER, probe.namespace, "3000"],
                           capture_output=True, text=True, timeout=120, check=True)
    sent = json.loads(flood.stdout.strip().splitlines()[-1])["sent"]
    assert sent > 0
    part = MemoryStore(db_url).partition(certified_hash)

    def accounted():
        diagnostics = probe.diagnostics.get("episodic_logger", {})
        counted = {k: int(v) for k, v in diagnostics.items()
                   if k.startswith("rejected.") and int(v)}
        stored = part.count_events(EXECUTION_RESULT)
        return (stored + sum(counted.values()) == sent and diagnostics.get("pending") == "0"
                and int(diagnostics.get("written", -1)) == stored and (stored, counted))

    stored, counted = wait_until(accounted, 60, lambda: (
        f"stored {part.count_events(EXECUTION_RESULT)} + counted to add up to {sent}; "
        f"diagnostics {probe.diagnostics.get('episodic_logger')}"))
    assert set(counted) <= {"rejected.backlog_full", "rejected.dds_lost"}, counted
    diagnostics = probe.diagnostics["episodic_logger"]
    assert int(diagnostics["lost_total"]) == sum(counted.values())
    intents = [e.payload["intent_id"] for e in part.events([EXECUTION_RESULT])]
    assert len(set(intents)) == len(intents)  # nothing twice
    assert intents == sorted(intents, key=lambda s: int(s.split("-")[1]))  # arrival order
    assert stack.exited() == {}


def test_a_round_that_ran_out_of_room_is_followed_at_once_when_the_writer_catches_up():
    """IntakeThread: after a round that left results in the reader (take returned True),
    the next one starts when `room` returns, not a whole period later: a small bound on
    what the logger holds in Python does not bound how fast it drains a burst."""
    import threading
    import time

    from robot_memory.ros.logger_intake import IntakeThread

    rounds, done = [], threading.Event()

    def take() -> bool:
        rounds.append(time.monotonic())
        if len(rounds) == 6:
            done.set()
        return len(rounds) < 6  # five rounds short of room, then the reader is empty

    intake = IntakeThread(1.0, take, logger=None, room=lambda timeout: True)
    try:
        assert done.wait(3.0), rounds  # period 1 s: the first round, then five at once
        assert rounds[-1] - rounds[0] < 0.5
        time.sleep(1.3)
        assert len(rounds) == 7  # the reader was empty: back to one round a period
    finally:
        intake.stop()

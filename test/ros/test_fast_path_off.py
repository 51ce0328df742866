"""A node that has to let rclpy read what its hand-written codec does not (robot_memory/
wire/) says so once in its log and keeps it as a key on /diagnostics; the result is
stored all the same."""

from robot_memory.event_kinds import EXECUTION_RESULT
from robot_memory.msg import ExecutionResult
from rclpy.serialization import serialize_message
from robot_memory.store import MemoryStore

from ros.conftest import stack_log, wait_until

KEY = "fast_path_off.ExecutionResult"
WHY = "a string with a NUL, a bool neither 0 nor 1, or bytes past the message"


def test_a_result_rclpy_has_to_read_is_said_once_and_stored(probe, start_stack,
                                                            certified_hash, db_url):
    stack = start_stack(nodes=["manifest_verifier", "episodic_logger"],
                        managed_nodes=["episodic_logger"])
    probe.wait_identity()
    probe.wait_logger()
    probe.publish_result(stamp_s=1.0, intent_id="read here")
    wait_until(lambda: (probe.diagnostics.get("episodic_logger") or {}).get("written") == "1",
               20, "the first result written")
    assert KEY not in probe.diagnostics["episodic_logger"]
    for i in range(2):  # bytes past the message: rclpy reads them, this reader does not
        data = serialize_message(ExecutionResult(skill_id="manipulation.grasp",
                                                 intent_id=f"read by rclpy {i}"))
        probe.results.publish(data + bytes(8))
    wait_until(lambda: (d := probe.diagnostics.get("episodic_logger")) and
               d.get(KEY) == f"{WHY} (2 times)" and d.get("written") == "3", 20,
               lambda: f"{KEY} and 3 written on /diagnostics: {probe.diagnostics}")
    part = MemoryStore(db_url).partition(certified_hash)
    assert [e.payload["intent_id"] for e in part.events([EXECUTION_RESULT])] == [
        "read here", "read by rclpy 0", "read by rclpy 1"]
    assert stack_log(stack).count("the hand-written CDR codec") == 1
    assert f"ExecutionResult: the hand-written CDR codec (robot_memory/wire/) is passed " \
           f"over for rclpy's: {WHY}." in stack_log(stack)

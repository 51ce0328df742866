"""Malformed results are rejected with a logged reason and counted; the others are kept."""

import math
import subprocess
import sys
import time

from robot_memory.consolidation import EXECUTION_RESULT
from robot_memory.msg import ExecutionResult
from robot_memory.ros.qos import EXECUTION_RESULTS_QOS
from robot_memory.ros.matching import wait_for_subscriber
from robot_memory.store import MemoryStore

from ros.conftest import stack_log, wait_until

WRONG_TYPE_PUBLISHER = """
import sys, time, rclpy
from std_msgs.msg import String
rclpy.init()
node = rclpy.create_node("wrong_type_skill", namespace=sys.argv[1])
publisher = node.create_publisher(String, "execution_results", 10)
for _ in range(20):
    publisher.publish(String(data="not an execution result"))
    time.sleep(0.05)
node.destroy_node()
rclpy.shutdown()
"""

# A publisher the logger cannot hear, held until stdin closes: another message type
# ("string"), or the right type with best-effort QoS against the logger's reliable reader
# (a process each: one process cannot have two types on one topic).
UNHEARD_PUBLISHER = """
import sys, rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import String
from robot_memory.msg import ExecutionResult
rclpy.init()
if sys.argv[2] == "string":
    node = rclpy.create_node("string_skill", namespace=sys.argv[1])
    node.create_publisher(String, "execution_results", 10)
else:
    node = rclpy.create_node("best_effort_skill", namespace=sys.argv[1])
    node.create_publisher(ExecutionResult, "execution_results",
                          QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT))
print("up", flush=True)
sys.stdin.read()
"""


def test_malformed_results_are_rejected_counted_and_logged(probe, start_stack, certified_hash,
                                                           db_url):
    stack = start_stack()
    probe.wait_identity()
    probe.wait_logger()
    probe.publish_result(stamp_s=1)
    probe.publish_result(stamp_s=2, skill_id="")
    probe.publish_result(stamp_s=3, parameters={"force_n": math.nan})
    probe.publish_result(stamp_s=4, observations=[])
    probe.publish_result(stamp_s=5, duration_s=-2.0)
    probe.publish_result(stamp_s=6, success=False, failure_reason="slipped")

    part = MemoryStore(db_url).partition(certified_hash)
    wait_until(lambda: part.count_events(EXECUTION_RESULT) == 3, 20, "3 accepted results")
    diag = wait_until(lambda: (d := probe.diagnostics.get("episodic_logger")) and
                      d.get("written") == "3" and d, 20, "logger diagnostics")
    assert diag["rejected.empty_skill_id"] == "1"
    assert diag["rejected.non_finite_value"] == "1"
    assert diag["rejected.invalid_value"] == "1"
    assert diag["rejected_total"] == "3"
    log = stack_log(stack)
    assert "rejected execution result on execution_results: skill_id:" in log
    assert "rejected execution result on execution_results: parameters.force_n:" in log
    assert [e.stamp_ns for e in part.events([EXECUTION_RESULT])] == [1e9, 4e9, 6e9]


def test_a_flood_of_bad_results_is_counted_one_by_one_and_logged_once_a_second(
        probe, start_stack, certified_hash, db_url):
    stack = start_stack()
    probe.wait_identity()
    probe.wait_logger()
    started = time.monotonic()
    for i in range(300):
        probe.publish_result(stamp_s=1 + i, parameters={"force_n": math.nan})
    wait_until(lambda: (d := probe.diagnostics.get("episodic_logger")) and
               d.get("rejected.non_finite_value") == "300", 30, "300 rejections counted")
    elapsed = time.monotonic() - started
    lines = [line for line in stack_log(stack).splitlines()
             if "parameters.force_n:" in line and "(reason non_finite_value)" in line]
    # One line at once, then at most one a second (each line costs rclpy about 1.5 ms).
    assert 1 <= len(lines) <= elapsed + 2, (len(lines), elapsed)
    assert MemoryStore(db_url).partition(certified_hash).count_events(EXECUTION_RESULT) == 0


def test_extra_result_topics_are_logged(probe, start_stack, certified_hash, db_url):
    start_stack(result_topics=["arm/results"])
    probe.wait_identity()
    probe.wait_logger()
    extra = probe.create_publisher(ExecutionResult, "arm/results", EXECUTION_RESULTS_QOS)
    assert wait_for_subscriber(extra, 20), "the logger did not subscribe to arm/results"
    probe.publish_result(stamp_s=7, skill_id="navigation.dock", publisher=extra)
    part = MemoryStore(db_url).partition(certified_hash)
    wait_until(lambda: part.count_events(EXECUTION_RESULT) == 1, 20, "the extra topic's result")
    assert next(part.events([EXECUTION_RESULT])).payload["skill_id"] == "navigation.dock"


def test_oversized_wrong_type_and_flood_inputs_leave_the_logger_running(
        probe, start_stack, certified_hash, db_url):
    stack = start_stack(max_pending=50, flush_period_s=1.0)
    probe.wait_identity()
    probe.wait_logger()
    probe.publish_result(stamp_s=1, notes="x" * 5000)  # notes are capped at 2048 characters
    # Another message type on the same topic, from another process: not matched by DDS.
    subprocess.run([sys.executable, "-c", WRONG_TYPE_PUBLISHER, probe.namespace], check=True,
                   timeout=60)
    for i in range(1500):  # far more than max_pending within one flush period
        probe.publish_result(stamp_s=10 + i * 0.001)
    # Handled: the logger takes only while fewer than max_pending wait for the writer; the
    # rest of the flood waits in the reader's history, and all of it is stored.
    diag = wait_until(lambda: (d := probe.diagnostics.get("episodic_logger")) and
                      d.get("written") == "1500" and d.get("queue_depth") == "0" and d,
                      60, "the flood stored")
    assert diag["rejected.oversized"] == "1"
    assert diag["accepted"] == "1500" and diag["lost_total"] == "0"
    probe.publish_result(stamp_s=9000, intent_id="after-the-flood")
    part = MemoryStore(db_url).partition(certified_hash)
    wait_until(lambda: part.latest_event(EXECUTION_RESULT).payload["intent_id"]
               == "after-the-flood", 20, "a result after the flood")
    assert stack.exited() == {}
    assert "notes:" in stack_log(stack) and "(reason oversized)" in stack_log(stack)


def test_publishers_the_logger_cannot_hear_are_named_in_the_log_and_diagnostics(
        probe, start_stack):
    stack = start_stack()
    probe.wait_identity()
    probe.wait_logger()
    publishers = [subprocess.Popen([sys.executable, "-c", UNHEARD_PUBLISHER, probe.namespace,
                                    kind], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   text=True) for kind in ("string", "best_effort")]
    try:
        assert [p.stdout.readline().strip() for p in publishers] == ["up", "up"]
        ns = f"/{probe.namespace}"
        diag = wait_until(lambda: (d := probe.diagnostics.get("episodic_logger")) and
                          d.get("unheard_publishers") == "2" and d, 30, "2 unheard publishers")
        assert diag[f"unheard.{ns}/string_skill on execution_results"] == (
            "publishes std_msgs/msg/String, not robot_memory/msg/ExecutionResult")
        assert diag[f"unheard.{ns}/best_effort_skill on execution_results"].startswith(
            "QoS incompatible with the logger's reader:")
        level, message = probe.statuses["episodic_logger"]
        assert level == 1 and "unheard publishers:" in message, (level, message)
        assert f"{ns}/string_skill on execution_results" in message
        # Logged once each as it appears, not once per diagnostics period.
        log = wait_until(lambda: stack_log(stack).count("cannot be heard") == 2 and
                         stack_log(stack), 10, "one log line per unheard publisher")
        assert f"publisher {ns}/best_effort_skill on execution_results cannot be heard: " \
               "QoS incompatible" in log
    finally:
        for process in publishers:
            process.stdin.close()
            process.wait(timeout=30)
    # Gone from the graph: gone from the status, and the status is OK again.
    wait_until(lambda: probe.diagnostics["episodic_logger"].get("unheard_publishers") == "0"
               and probe.statuses["episodic_logger"][0] == 0, 30, "the publishers gone")
    assert stack_log(stack).count("cannot be heard") == 2

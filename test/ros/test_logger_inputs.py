"""Malformed results are rejected with a logged reason and counted; the others are kept."""

import math

from robot_memory.consolidation import EXECUTION_RESULT
from robot_memory.msg import ExecutionResult
from robot_memory.ros.qos import EXECUTION_RESULTS_QOS
from robot_memory.store import MemoryStore

from ros.conftest import stack_log, wait_until


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


def test_extra_result_topics_are_logged(probe, start_stack, certified_hash, db_url):
    start_stack(result_topics=["arm/results"])
    probe.wait_identity()
    probe.wait_logger()
    extra = probe.create_publisher(ExecutionResult, "arm/results", EXECUTION_RESULTS_QOS)
    wait_until(lambda: extra.get_subscription_count() > 0, 20, "logger on arm/results")
    probe.publish_result(stamp_s=7, skill_id="navigation.dock", publisher=extra)
    part = MemoryStore(db_url).partition(certified_hash)
    wait_until(lambda: part.count_events(EXECUTION_RESULT) == 1, 20, "the extra topic's result")
    assert next(part.events([EXECUTION_RESULT])).payload["skill_id"] == "navigation.dock"

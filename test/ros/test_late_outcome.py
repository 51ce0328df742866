"""A delayed outcome over DDS: a skill publishes a grasp as a success, then (the cup
turned up broken) an amendment of the same attempt to a failure; after the next pass
the fact counts one attempt, failed (docs/consolidation.md#amendments)."""

import json

KEY = "manipulation.grasp + glass_cup + sim_relaxed"


def test_a_success_amended_to_a_failure_counts_one_failed_attempt(probe, start_stack):
    start_stack(period_s=0.3)
    probe.wait_identity()
    probe.wait_logger()
    probe.publish_result(stamp_s=10, success=True, attempt_id="grasp-1")
    probe.wait_fact(lambda f: f.key == KEY and f.kind == "skill_success_rate"
                    and json.loads(f.value_json)["successes"] == 1)
    probe.publish_result(stamp_s=70, success=False, failure_reason="broken",
                         amends="grasp-1")
    fact = probe.wait_fact(lambda f: f.key == KEY and f.kind == "skill_success_rate"
                           and json.loads(f.value_json)["failures"] == 1)
    value = json.loads(fact.value_json)
    assert (fact.n_observations, value["successes"], value["failure_reasons"]) == \
        (1, 0, {"broken": 1})

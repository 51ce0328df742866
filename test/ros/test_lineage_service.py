"""The lineage of an action over DDS, through a real planner loop against a running
stack: the planner asks `ground` for an intent, the skill publishes the attempt with that
intent, the consolidator folds it, and `explain` with the intent_id (and `robot-memory
explain --intent` on the same store) joins the three."""

import json
import subprocess
import sys

from robot_memory.srv import ExplainFact

from ros.conftest import wait_until

KEY = "manipulation.grasp + glass_cup + sim_relaxed"
INTENT = "pick-cup-42"


def test_the_lineage_of_an_intent_through_a_planner_loop(probe, start_stack, db_url,
                                                         certified_hash):
    start_stack(period_s=0.3)
    probe.wait_identity()
    probe.wait_logger()
    for i in range(8):  # the history the planner is grounded in
        probe.publish_result(stamp_s=10 + i, success=i % 4 != 0,
                             failure_reason="" if i % 4 else "slipped")
    probe.wait_fact(lambda f: f.key == KEY and f.n_observations == 8)
    # The planner asks for its intent, acts on the answer, the skill reports the attempt.
    answer = wait_until(lambda: (a := probe.grounding.query(
        "manipulation.grasp", "glass_cup", "sim_relaxed", intent_id=INTENT)).ok and a, 20,
        "an OK answer to ground")
    force = answer.recommended_parameters()["force_n"]
    probe.publish_result(stamp_s=30, success=False, failure_reason="slipped",
                         parameters={"force_n": force}, intent_id=INTENT,
                         attempt_id="grasp-42")
    probe.wait_fact(lambda f: f.key == KEY and f.n_observations == 9)

    def lineage():
        response = probe.call(ExplainFact, "explain", ExplainFact.Request(intent_id=INTENT))
        if not response.found:
            return None
        found = json.loads(response.explanation_json)
        folded = found["results"] and found["results"][0]["folded_by_run"]
        return (response, found) if found["consultations"] and folded else None
    response, found = wait_until(lineage, 20, "the consultation and the folded result")
    # What the planner was told, as the server audited it.
    [consultation] = found["consultations"]
    assert consultation["consultation_id"] == answer.consultation_id
    assert [(f["fact_id"], f["kind"], f["key"]) for f in consultation["facts"]] == \
        [(f.fact_id, f.kind, f.key) for f in answer.facts]
    assert all(f["rule_version"] for f in consultation["facts"])
    # What the robot then did, and what it moved.
    [result] = found["results"]
    assert (result["success"], result["failure_reason"], result["parameters"]) == \
        (False, "slipped", {"force_n": force})
    assert {"kind": "skill_success_rate", "key": KEY} in result["moved_facts"]
    [fact] = [f for f in found["facts"] if f["key"] == KEY and f["kind"] == "skill_success_rate"]
    assert fact["n_observations"] == 9
    assert f"intent {INTENT}" in response.explanation_text
    assert "folded by run" in response.explanation_text
    # The command line reads the same lineage from the same store.
    cli = subprocess.run([sys.executable, "-m", "robot_memory.cli", "explain", "--db", db_url,
                          "--identity", certified_hash, "--intent", INTENT, "--json"],
                         capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout) == found
    # A later outcome of the same attempt: its own event, the original unchanged, and
    # both in the lineage with the names that join them.
    probe.publish_result(stamp_s=40, success=False, failure_reason="broken",
                         parameters={"force_n": force}, intent_id=INTENT, amends="grasp-42")

    def both():
        response = probe.call(ExplainFact, "explain", ExplainFact.Request(intent_id=INTENT))
        results = json.loads(response.explanation_json)["results"]
        return results if len(results) == 2 and results[1]["folded_by_run"] else None
    first, amendment = wait_until(both, 20, "the amendment in the lineage, folded")
    assert first["event_id"] == result["event_id"]  # the original, as it was stored
    assert (first["attempt_id"], first["success"]) == ("grasp-42", False)
    assert (amendment["amends"], amendment["failure_reason"]) == ("grasp-42", "broken")
    assert "amends" not in first and "attempt_id" not in amendment
    # It counted: it moved its attempt's facts (the attempt once, now broken).
    assert amendment["amendment"] == "applied"
    assert {"kind": "skill_success_rate", "key": KEY} in amendment["moved_facts"]
    # An intent nothing carries is said to be unknown, by name.
    missing = probe.call(ExplainFact, "explain", ExplainFact.Request(intent_id="pick-none"))
    assert not missing.found and "'pick-none'" in missing.reason

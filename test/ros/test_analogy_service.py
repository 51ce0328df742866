"""`ground` over DDS for a target the robot never handled: ANALOGY when the planner asks,
today's ABSTAIN no_fact when it does not, and `explain` shows the analogy was served."""

from robot_memory.ros.client import format_analogy_block
from robot_memory.msg import KeyValue
from robot_memory.srv import ExplainFact, GroundingQuery

from ros.conftest import wait_until

GLASS_CUP = "manipulation.grasp + glass_cup + sim_relaxed"


def test_ground_lends_the_nearest_known_target_under_analogy(probe, start_stack):
    start_stack(period_s=0.3)
    probe.wait_identity()
    probe.wait_logger()
    for i, (target, mass) in enumerate([("glass_cup", 0.20), ("mug", 0.35),
                                        ("dumbbell", 2.0)] * 4):
        probe.publish_result(stamp_s=10 + i, target_class=target,
                             observations=[KeyValue(key="mass_kg", value=mass)])
    lent = probe.wait_fact(lambda f: f.key == GLASS_CUP and f.n_observations == 4)
    probe.wait_fact(lambda f: f.key == "dumbbell + mass_kg" and f.status == "active")

    plain = probe.grounding.query("manipulation.grasp", "glass_jar", "sim_relaxed")
    assert (plain.status, plain.reason_code, plain.analogies) == ("ABSTAIN", "no_fact", ())
    answer = wait_until(lambda: (a := probe.grounding.query(
        "manipulation.grasp", "glass_jar", "sim_relaxed", allow_analogies=True,
        target_properties={"mass_kg": 0.22}, intent_id="pick-jar-1")).status == "ANALOGY"
        and a, 20, "an ANALOGY answer")
    assert answer.reason_code == GroundingQuery.Response.REASON_NO_FACT and not answer.ok
    # Only the robot's own context facts (the environment's zone_risk), nothing lent.
    assert [f.kind for f in answer.facts] == ["zone_risk"]
    (analogy,) = answer.analogies  # mug is farther than analogy_max_distance
    assert analogy.target_class == "glass_cup" and analogy.distance > 0.0
    (compared,) = analogy.properties
    assert (compared.name, compared.query_value, compared.case_value) == ("mass_kg", 0.22, 0.2)
    assert (compared.query_source, compared.scale_source) == ("request", "mad")
    assert [f.fact_id for f in analogy.facts] == [lent.fact_id]
    block = format_analogy_block("glass_jar", answer.analogies)
    assert block.startswith("no facts for this robot about glass_jar; similar known targets "
                            "(analogies, not knowledge of glass_jar): glass_cup, distance")
    assert f"{GLASS_CUP}: recommended_force_n = 25" in block

    far = probe.grounding.query("manipulation.grasp", "glass_jar", "sim_relaxed",
                                allow_analogies=True, target_properties={"mass_kg": 9.0})
    assert (far.status, far.reason_code) == ("ABSTAIN", "no_close_case")

    def explained():
        response = probe.call(ExplainFact, "explain", ExplainFact.Request(fact_id=lent.fact_id))
        return response if "as an analogy for glass_jar" in response.explanation_text else None
    response = wait_until(explained, 15, "the analogy consultation in the explanation")
    assert "pick-jar-1" in response.explanation_text
    wait_until(lambda: probe.diagnostics.get("grounding_server", {}).get(
        "analogy_answers") == "1", 20, "the ANALOGY answer counted on /diagnostics")

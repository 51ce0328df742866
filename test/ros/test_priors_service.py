"""`ground` over DDS with fleet priors from a sibling's bundle: PRIOR for a target this
robot never handled, the prior beside OK once its own evidence is servable, today's
answer for a planner that does not ask, a refused source counted, every answer
audited with whose facts it served."""

from robot_memory.ros.client import format_prior_block
from robot_memory.consolidation import consolidation_pass
from robot_memory.event_kinds import FACT_CONSULTATION
from robot_memory.evidence.bundle import export_bundle
from robot_memory.manifest import load_manifest
from robot_memory.srv import ExplainFact
from robot_memory.store import MemoryStore

from helpers import result_event
from ros.conftest import wait_until

GLASS_CUP = "manipulation.grasp + glass_cup + sim_relaxed"


def sibling_bundle(tmp_path, manifest_file, agent, embodiment=None):
    """A bundle of another robot that grasped glass_cup 12 times, 9 of them at 25 N."""
    text = manifest_file.read_text().replace("demo-arm-01", agent)
    if embodiment:
        text = text.replace("ur5e+robotiq_2f85", embodiment)
    manifest = tmp_path / f"{agent}.yaml"
    manifest.write_text(text)
    part = MemoryStore(f"sqlite:///{tmp_path / agent}.db").partition(
        load_manifest(manifest).identity_hash())
    part.append_many([result_event(i + 1, success=i % 4 != 3) for i in range(12)])
    consolidation_pass(part)
    export_bundle(part, tmp_path / f"{agent}.bundle", manifest_path=manifest)
    return tmp_path / f"{agent}.bundle", part.identity_hash


def test_ground_serves_a_siblings_facts_as_prior(probe, start_stack, tmp_path, manifest_file,
                                                 db_url, certified_hash):
    bundle, sibling = sibling_bundle(tmp_path, manifest_file, "demo-arm-02")
    other_arm, _ = sibling_bundle(tmp_path, manifest_file, "panda-01", "franka_panda")
    start_stack(period_s=0.3, priors_sources=[str(other_arm), str(bundle)])
    probe.wait_identity()
    probe.wait_logger()

    plain = probe.grounding.query("manipulation.grasp", "glass_cup", "sim_relaxed")
    assert (plain.status, plain.reason_code, plain.priors) == ("ABSTAIN", "no_fact", ())
    answer = probe.grounding.query("manipulation.grasp", "glass_cup", "sim_relaxed",
                                   allow_priors=True, intent_id="pick-cup-1")
    assert (answer.status, answer.reason_code) == ("PRIOR", "no_fact") and not answer.ok
    assert answer.facts == ()
    (prior,) = answer.priors
    assert (prior.prior_n, prior.prior_successes, prior.own_n) == (12, 9, 0)
    assert prior.blended_success_rate == 0.75 and prior.prior_weight == 10.0
    (source,) = prior.sources
    assert (source.identity_hash, source.agent_id, source.origin) == \
        (sibling, "demo-arm-02", str(bundle))
    assert source.fact.key == GLASS_CUP
    block = format_prior_block("glass_cup", answer.priors)
    assert block.startswith("fleet priors for glass_cup (robots of the same embodiment, not "
                            "this robot's evidence): ")
    assert "demo-arm-02: recommended_force_n = 25" in block

    # The robot's own attempts: 4 failures at 5 N. Once its fact is servable it answers OK
    # with its own facts, and the prior rides along, blended with its own counts.
    for i in range(4):
        probe.publish_result(stamp_s=10 + i, success=False, failure_reason="slipped",
                             parameters={"force_n": 5.0})
    own = probe.wait_fact(lambda f: f.key == GLASS_CUP and f.n_observations == 4)
    answer = wait_until(lambda: (a := probe.grounding.query(
        "manipulation.grasp", "glass_cup", "sim_relaxed", allow_priors=True)).status == "OK"
        and a, 20, "an OK answer from the robot's own fact")
    assert own.fact_id in [f.fact_id for f in answer.facts]
    (prior,) = answer.priors
    assert (prior.own_n, prior.own_successes) == (4, 0)
    assert prior.blended_success_rate == round(7.5 / 14, 6)

    def explained():
        response = probe.call(ExplainFact, "explain", ExplainFact.Request(fact_id=own.fact_id))
        return response if "beside fleet priors of 1 robot(s)" in \
            response.explanation_text else None
    wait_until(explained, 15, "the blended consultation in the explanation")

    wait_until(lambda: (status := probe.diagnostics.get("grounding_server", {})).get(
        "priors_refused_sources") == "1" and status.get("prior_answers") == "1",
        20, "the refused source and the PRIOR answer counted on /diagnostics")
    part = MemoryStore(db_url).partition(certified_hash)
    audited = wait_until(lambda: [e.payload for e in part.events([FACT_CONSULTATION])
                                  if e.payload["intent_id"] == "pick-cup-1"],
                         20, "the PRIOR answer's audit record")
    (record,) = audited
    assert record["query"]["allow_priors"] is True and record["facts"] == []
    assert record["priors"][0]["sources"][0]["identity_hash"] == sibling

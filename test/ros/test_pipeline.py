"""End to end over DDS: results in -> rows -> a pass -> facts on the topic -> the service."""

from robot_memory.consolidation import CONSOLIDATION_RUN, EXECUTION_RESULT
from robot_memory.manifest import load_manifest
from robot_memory.msg import IdentityStatus
from robot_memory.store import MemoryStore, verify_chain

from ros.conftest import BOTH_PROCESS_MODES, wait_until

KEY = "manipulation.grasp + glass_cup + sim_relaxed"


def publish_seed_example(probe, start_s=100.0):
    attempts = [(5.0, False)] * 3 + [(15.0, False)] + [(25.0, True)] * 12
    for i, (force, success) in enumerate(attempts):
        probe.publish_result(stamp_s=start_s + 3 * i, success=success,
                             parameters={"force_n": force},
                             failure_reason="" if success else "slipped")
    return len(attempts)


@BOTH_PROCESS_MODES
def test_results_become_facts_the_planner_can_ground_on(probe, start_stack, manifest_file,
                                                        certified_hash, db_url):
    start_stack()
    status = probe.wait_identity()
    assert status.state == IdentityStatus.VERIFIED and status.computed_hash == certified_hash
    assert probe.grounding.wait_for_service(30)

    before = wait_until(lambda: (r := probe.grounding.query(
        "manipulation.grasp", "glass_cup", "sim_relaxed")).status != "IDENTITY_UNVERIFIED" and r,
        20, "the grounding server to activate")
    assert (before.status, before.reason_code) == ("ABSTAIN", "no_fact")
    assert before.identity_hash == certified_hash and before.consultation_id

    probe.wait_logger()
    sent = publish_seed_example(probe)
    fact = probe.wait_fact(lambda f: f.key == KEY and f.n_observations == sent)
    assert fact.status == "active" and fact.has_success_rate
    # Rules v2.0: the rate of the recommended band (12 of 12 at 25 N), not of all forces.
    assert abs(fact.success_rate - 1.0) < 1e-12
    assert [(kv.key, kv.value) for kv in fact.recommended_parameters] == [("force_n", 25.0)]

    # The facts topic is latched: a planner that starts late still gets the snapshot.
    assert probe.facts[-1].identity_hash == certified_hash

    after = wait_until(lambda: (r := probe.grounding.query(
        "manipulation.grasp", "glass_cup", "sim_relaxed", intent_id="pick-1")).ok and r,
        10, "grounding to serve the new fact")
    assert after.facts[0].key == KEY and after.facts[0].n_observations == sent
    # Only success-rate facts say they carry one; the others hold 0, never NaN.
    assert [(f.kind, f.has_success_rate) for f in after.facts if f.has_success_rate] == [
        ("skill_success_rate", True)]
    assert all(f.success_rate == 0.0 for f in after.facts if not f.has_success_rate)
    assert len(after.facts) > 1

    part = MemoryStore(db_url).partition(certified_hash)
    assert part.count_events(EXECUTION_RESULT) == sent
    assert part.count_events(CONSOLIDATION_RUN) >= 1
    stamps = [e.stamp_ns for e in part.events([EXECUTION_RESULT])]
    assert stamps[0] == 100 * 10**9  # the skill's header stamp, not the arrival time
    consultations = wait_until(lambda: list(part.events(["fact_consultation"])) or None, 10,
                               "consultation audit records")
    # Every pick-1 query is audited: those that abstained (before the fact reached the
    # grounding server) with no facts, and the one that was served with the fact.
    assert wait_until(lambda: [c for c in part.events(["fact_consultation"])
                               if c.payload["intent_id"] == "pick-1" and c.payload["facts"]
                               and c.payload["facts"][0]["key"] == KEY] or None,
                      10, "the served pick-1 consultation")
    assert consultations
    assert verify_chain(part).ok
    assert load_manifest(manifest_file).identity_hash() == certified_hash


def test_identity_hash_is_unchanged_across_many_passes(probe, start_stack, manifest_file,
                                                       certified_hash, db_url):
    start_stack(period_s=0.2)
    probe.wait_identity()
    probe.wait_logger()
    for round_number in range(3):
        for i in range(5):
            probe.publish_result(stamp_s=10 + round_number * 10 + i)
        probe.wait_fact(lambda f, n=5 * (round_number + 1): f.n_observations == n)
        assert load_manifest(manifest_file).identity_hash() == certified_hash
    runs = MemoryStore(db_url).partition(certified_hash).count_events(CONSOLIDATION_RUN)
    assert runs >= 3


@BOTH_PROCESS_MODES
def test_consultations_are_flushed_when_the_server_stops(probe, start_stack, certified_hash,
                                                         db_url):
    stack = start_stack(audit_flush_period_s=60.0)  # only the shutdown flush can write them
    probe.wait_identity()
    wait_until(lambda: probe.grounding.query("manipulation.grasp").status != "IDENTITY_UNVERIFIED",
               20, "the grounding server to activate")
    ids = {probe.grounding.query("manipulation.grasp", intent_id=f"i{i}").consultation_id
           for i in range(5)}
    stack.stop()
    part = MemoryStore(db_url).partition(certified_hash)
    stored = {e.payload["consultation_id"] for e in part.events(["fact_consultation"])}
    assert ids <= stored

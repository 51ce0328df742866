"""Fleet priors: a sibling's facts of the same skill on the same target, served as a
prior (status PRIOR, or beside an OK), blended deterministically with the robot's own
counts, labelled and audited, never the robot's own; from a bundle only once it
verifies and declares this robot's embodiment."""

import json
import shutil
from dataclasses import replace

import pytest

from robot_memory.grounding.audit import consultation_payload
from robot_memory.canonical import canonical_json
from robot_memory.consolidation import RulesConfig, consolidation_pass
from robot_memory.evidence.bundle import export_bundle
from robot_memory.grounding.index import (ABSTAIN, ANALOGY, OK, PRIOR, GroundingIndex,
                                          GroundingRequest)
from robot_memory.manifest import load_manifest
from robot_memory.operation.parameters import node_defaults
from robot_memory.grounding.priors import PriorFact, PriorIndex, PriorSettings
from robot_memory.grounding.priors_sources import bundle_priors, load_priors
from robot_memory.store import MemoryStore

from helpers import result_event as result
from helpers import write_manifest

GRASP = "manipulation.grasp"
CONFIG = RulesConfig(promotion_min_observations=5)


def manifest_file(tmp_path, agent, embodiment="ur5e+robotiq_2f85"):
    return write_manifest(tmp_path, agent, embodiment)


def learned(store, identity, outcomes, target="glass_cup", force=25.0):
    """A partition that logged `outcomes` (True = success) of the grasp, and its pass."""
    part = store.partition(identity)
    part.append_many([result(i + 1, success=ok, force=force, target=target)
                      for i, ok in enumerate(outcomes)])
    consolidation_pass(part, CONFIG)
    return part


@pytest.fixture
def sibling(db_url, tmp_path):
    path = manifest_file(tmp_path, "arm-01")
    identity = load_manifest(path).identity_hash()
    part = learned(MemoryStore(db_url), identity, [True] * 16 + [False] * 4)
    return part, path


def priors_of(part, origin="test"):
    return PriorIndex([PriorFact(part.identity_hash, "arm-01", origin, f)
                       for f in part.facts()], PriorSettings(max_weight=10.0))


def ask(target="glass_cup", **fields):
    return GroundingRequest(GRASP, target, allow_priors=True, **fields)


def test_a_robot_with_no_fact_gets_the_fleets_labelled_as_prior(sibling, db_url):
    part, _ = sibling
    own = GroundingIndex("b" * 64, [])
    answer = own.lookup(ask(), priors=priors_of(part))
    assert (answer.status, answer.reason_code) == (PRIOR, "no_fact")
    assert "priors from 1 robot(s) of the same embodiment (not this robot's evidence)" \
        in answer.reason
    assert answer.facts == () and answer.analogies == ()
    (prior,) = answer.priors
    assert (prior.skill_id, prior.target_class, prior.environment) == \
        (GRASP, "glass_cup", "sim_relaxed")
    assert (prior.prior_n, prior.prior_successes, prior.prior_weight) == (20, 16, 10.0)
    assert (prior.own_n, prior.own_successes, prior.own_share) == (0, 0, 0.0)
    assert prior.blended_success_rate == 0.8
    (source,) = prior.sources
    assert source.identity_hash == part.identity_hash and source.origin == "test"
    assert source.fact.value["recommended_parameters"]["force_n"]["median"] == 25.0


def test_own_evidence_takes_over_as_it_grows(sibling, db_url):
    part, _ = sibling
    store = MemoryStore(db_url)
    shares, rates = [], []
    for n, identity in ((3, "c" * 64), (10, "d" * 64), (90, "e" * 64)):
        # The sibling's force works 80% of the time; this robot's never: own evidence wins.
        own = learned(store, identity, [False] * n, force=5.0)
        answer = GroundingIndex(identity, own.facts()).lookup(ask(), priors=priors_of(part))
        (prior,) = answer.priors
        assert (prior.own_n, prior.own_successes) == (n, 0)
        shares.append(prior.own_share)
        rates.append(prior.blended_success_rate)
        if n == 3:  # a candidate: the robot's own word is not servable yet
            assert (answer.status, answer.reason_code) == (PRIOR, "only_candidates")
        else:
            assert answer.status == OK
            assert "skill_success_rate" in [f.kind for f in answer.facts]
            assert all(f.id != 0 and f in own.facts() for f in answer.facts)
    assert shares == [round(3 / 13, 6), 0.5, 0.9]
    assert rates == [round(8 / 13, 6), 0.4, 0.08]  # (0 + 10 x 0.8) / (n + 10)


def test_a_planner_that_does_not_ask_gets_todays_answer(sibling):
    part, _ = sibling
    own = GroundingIndex("b" * 64, [])
    plain = GroundingRequest(GRASP, "glass_cup")
    assert own.lookup(replace(ask(), allow_priors=False), priors=priors_of(part)) == \
        own.lookup(plain)
    assert own.lookup(plain).status == ABSTAIN


def test_priors_only_for_the_asked_target_and_environment(sibling):
    part, _ = sibling
    own = GroundingIndex("b" * 64, [])
    assert own.lookup(ask("mug"), priors=priors_of(part)).status == ABSTAIN
    assert own.lookup(ask(environment="ward_3"), priors=priors_of(part)).status == ABSTAIN
    assert own.lookup(ask(fact_kinds=("interaction_pattern",)),
                      priors=priors_of(part)).status == ABSTAIN
    assert own.lookup(ask(environment="sim_relaxed"), priors=priors_of(part)).status == PRIOR


def test_a_prior_comes_before_an_analogy(sibling):
    part, _ = sibling
    own = GroundingIndex("b" * 64, [])
    answer = own.lookup(ask(allow_analogies=True), priors=priors_of(part))
    assert answer.status == PRIOR and answer.analogies == ()
    assert own.lookup(ask(allow_analogies=True)).status != ANALOGY  # nothing to lend


def test_contested_own_evidence_is_not_papered_over(sibling, db_url):
    part, _ = sibling
    own = learned(MemoryStore(db_url), "c" * 64, [True] * 10)
    index = GroundingIndex("c" * 64, own.facts())
    answer = index.lookup(ask(min_confidence=0.999), priors=priors_of(part))
    assert (answer.status, answer.reason_code) == (ABSTAIN, "below_confidence")
    assert answer.priors == ()


def test_the_blend_is_deterministic_whatever_the_source_order(db_url, tmp_path):
    store = MemoryStore(db_url)
    a = learned(store, "1" * 64, [True] * 7 + [False] * 3)
    b = learned(store, "2" * 64, [True] * 1 + [False] * 9)
    facts = [PriorFact(p.identity_hash, name, "test", f)
             for p, name in ((a, "a"), (b, "b")) for f in p.facts()]
    first = GroundingIndex("3" * 64, []).lookup(ask(), priors=PriorIndex(facts))
    again = GroundingIndex("3" * 64, []).lookup(ask(), priors=PriorIndex(facts[::-1]))
    assert first == again
    (prior,) = first.priors
    assert [s.identity_hash for s in prior.sources] == ["1" * 64, "2" * 64]
    assert (prior.prior_n, prior.prior_successes, prior.blended_success_rate) == (20, 8, 0.4)


def test_the_audit_names_whose_facts_with_their_counts(sibling):
    part, _ = sibling
    answer = GroundingIndex("b" * 64, []).lookup(ask(), priors=priors_of(part))
    payload = consultation_payload("c1", "planner", "intent", {"allow_priors": True}, answer)
    assert payload["facts"] == []
    (entry,) = payload["priors"]
    assert (entry["prior_n"], entry["blended_success_rate"]) == (20, 0.8)
    (source,) = entry["sources"]
    assert (source["identity_hash"], source["n"], source["successes"]) == \
        (part.identity_hash, 20, 16)
    assert source["key"] == "manipulation.grasp + glass_cup + sim_relaxed"
    canonical_json(payload)  # the log can hold it
    plain = GroundingIndex("b" * 64, []).lookup(GroundingRequest(GRASP, "glass_cup"))
    assert "priors" not in consultation_payload("c2", "p", "i", {}, plain)


def test_lookups_never_write_the_robots_own_facts(sibling, db_url):
    part, _ = sibling
    own = learned(MemoryStore(db_url), "c" * 64, [False] * 6)
    before = canonical_json([f.value for f in own.facts()])
    index = GroundingIndex("c" * 64, own.facts())
    for _ in range(3):
        index.lookup(ask(), priors=priors_of(part))
    assert canonical_json([f.value for f in own.facts()]) == before


def test_the_parameter_table_holds_the_settings_defaults():
    defaults = node_defaults("grounding_server")
    assert defaults["prior_max_weight"] == PriorSettings().max_weight
    assert defaults["priors_sources"] == []


@pytest.fixture
def bundle(sibling, tmp_path):
    part, manifest = sibling
    out = tmp_path / "arm-01.bundle"
    export_bundle(part, out, CONFIG, manifest_path=manifest)
    return out


def test_a_verified_siblings_bundle_is_a_source(bundle, sibling):
    part, _ = sibling
    facts = bundle_priors(bundle, "b" * 64, "ur5e+robotiq_2f85")
    assert {(f.identity_hash, f.agent_id, f.origin) for f in facts} == \
        {(part.identity_hash, "arm-01", str(bundle))}
    assert [f.fact.value_json for f in facts] == \
        [f.value_json for f in part.facts() if f.kind == "skill_success_rate"]
    answer = GroundingIndex("b" * 64, []).lookup(ask(), priors=PriorIndex(facts))
    assert answer.status == PRIOR and answer.priors[0].prior_n == 20


def test_bad_sources_are_refused_with_why_and_good_ones_still_used(bundle, sibling, tmp_path):
    part, _ = sibling
    tampered = tmp_path / "tampered"
    shutil.copytree(bundle, tampered)
    lines = (tampered / "facts.jsonl").read_text().splitlines()
    entry = json.loads(lines[-1])
    entry["confidence"] = 0.99
    (tampered / "facts.jsonl").write_text("\n".join(lines[:-1] + [canonical_json(entry)]) + "\n")
    loaded = load_priors([str(tampered), str(bundle), str(tmp_path / "missing"), str(bundle)],
                         "b" * 64, "ur5e+robotiq_2f85")
    assert len(loaded.refused) == 2
    assert loaded.refused[0].startswith(f"priors bundle {tampered} does not verify: ")
    assert "facts.jsonl" in loaded.refused[0]
    assert str(tmp_path / "missing") in loaded.refused[1]
    assert {f.origin for f in loaded.facts} == {str(bundle)}

    other = load_priors([str(bundle)], "b" * 64, "franka_panda")
    assert other.facts == [] and "embodiment 'ur5e+robotiq_2f85', this robot's is " \
        "'franka_panda'" in other.refused[0]
    own = load_priors([str(bundle)], part.identity_hash, "ur5e+robotiq_2f85")
    assert own.facts == [] and "this robot's own memory" in own.refused[0]


def test_a_bundle_whose_manifest_is_swapped_is_refused(bundle, tmp_path):
    swapped = tmp_path / "swapped"
    shutil.copytree(bundle, swapped)
    other = manifest_file(tmp_path, "arm-09")
    shutil.copy(other, swapped / "manifest.yaml")
    loaded = load_priors([str(swapped)], "b" * 64, "ur5e+robotiq_2f85")
    assert loaded.facts == [] and len(loaded.refused) == 1
    assert str(swapped) in loaded.refused[0]

"""What `ground` serves of old evidence, and of a contested success rate.

Staleness is a serve-time view: a fact's confidence is served decayed by how far its
newest evidence lies behind the robot's newest evidence, while the stored facts stay as
the log made them."""

import random
from dataclasses import replace

import pytest

from robot_memory.consolidation import RulesConfig, consolidation_pass
from robot_memory.consolidation.override_plan import OPERATOR_RULE_VERSION
from robot_memory.grounding.index import ABSTAIN, OK, GroundingIndex, GroundingRequest
from robot_memory.store import MemoryStore

from helpers import result_event as result

IDENT = "5" * 64
DAY_S = 86_400.0
HALF_LIFE_S = 90 * DAY_S
CONFIG = RulesConfig(promotion_min_observations=3)
GRASP = "manipulation.grasp"


def learned(db_url, *batches):
    """The facts after one pass over each batch in turn (the facts of the last)."""
    part = MemoryStore(db_url).partition(IDENT)
    for batch in batches:
        part.append_many(batch)
        consolidation_pass(part, CONFIG)
    return part


def old_cup(start_s: float = 0.0):
    """16 grasps of old_cup, all successful, weighed each time, from start_s on."""
    return [result(start_s + i, target="old_cup", observations={"mass_kg": 0.3})
            for i in range(16)]


def mug(start_s: float):
    return [result(start_s + i, target="mug") for i in range(16)]


@pytest.fixture
def facts(db_url):
    """old_cup last grasped on day 0; the robot kept working (mugs) until day 200."""
    return learned(db_url, old_cup() + mug(200 * DAY_S)).facts()


def rate(answer):
    return next(f for f in answer.facts if f.kind == "skill_success_rate")


def test_a_fact_left_behind_is_served_decayed_and_says_so(facts):
    stored = GroundingIndex(IDENT, facts)
    index = GroundingIndex(IDENT, facts, stale_half_life_s=HALF_LIFE_S)
    ask = GroundingRequest(GRASP, "old_cup", "sim_relaxed")
    before, after = stored.lookup(ask), index.lookup(ask)
    assert (before.status, after.status) == (OK, OK)
    age_s = 200 * DAY_S  # old_cup's newest result behind the mugs' newest
    factor = 2 ** (-age_s / HALF_LIFE_S)
    assert rate(after).confidence == pytest.approx(rate(before).confidence * factor)
    assert rate(after).value == rate(before).value  # only the confidence is served decayed
    assert after.reason.startswith("stale-decayed: ")
    assert "skill_success_rate [manipulation.grasp + old_cup + sim_relaxed] " \
           f"x{factor:.3f} (no fresh evidence for 200.0 days)" in after.reason
    # The context fact about old_cup (its mass) is as old: decayed too.
    mass = next(f for f in after.facts if f.kind == "object_property")
    assert mass.confidence < next(f for f in before.facts
                                  if f.kind == "object_property").confidence
    # The mug's facts are the newest evidence: served as stored.
    mug_ask = GroundingRequest(GRASP, "mug", "sim_relaxed")
    assert index.lookup(mug_ask) == stored.lookup(mug_ask)


def test_below_min_confidence_only_by_decay_abstains_stale(facts):
    index = GroundingIndex(IDENT, facts, stale_half_life_s=HALF_LIFE_S)
    stored = rate(GroundingIndex(IDENT, facts).lookup(GroundingRequest(GRASP, "old_cup")))
    served = rate(index.lookup(GroundingRequest(GRASP, "old_cup")))
    assert served.confidence < 0.5 <= stored.confidence  # what the test is about
    answer = index.lookup(GroundingRequest(GRASP, "old_cup", min_confidence=0.5))
    assert (answer.status, answer.reason_code) == (ABSTAIN, "stale")
    assert answer.reason.startswith("no fresh evidence about manipulation.grasp on old_cup in "
                                    "any environment for 200.0 days while the robot kept "
                                    "working: confidence ")
    assert all(f.kind not in ("skill_success_rate", "interaction_pattern")
               for f in answer.facts)
    # Asked above the stored confidence too: it was never confident enough, not stale.
    too_high = index.lookup(GroundingRequest(GRASP, "old_cup", min_confidence=0.999))
    assert too_high.reason_code == "below_confidence"
    # Without decay, the same question is answered OK.
    assert GroundingIndex(IDENT, facts).lookup(
        GroundingRequest(GRASP, "old_cup", min_confidence=0.5)).status == OK


def test_everything_equally_old_is_nothing_stale(db_url):
    """A robot switched off for a year: its facts are as fresh as its newest evidence."""
    facts = learned(db_url, old_cup() + mug(0.0)).facts()
    stored = GroundingIndex(IDENT, facts)
    index = GroundingIndex(IDENT, facts, stale_half_life_s=HALF_LIFE_S)
    for target in ("old_cup", "mug"):
        ask = GroundingRequest(GRASP, target, min_confidence=0.5)
        answer = index.lookup(ask)
        assert answer.status == OK and "stale" not in answer.reason
        assert [f.confidence for f in answer.facts] == pytest.approx(
            [f.confidence for f in stored.lookup(ask).facts], abs=1e-6)


def test_the_newest_evidence_is_a_function_of_the_facts_however_they_came(db_url):
    """Built at once, in any order, or patched pass after pass: the same newest evidence
    time and the same answers (with_changes keeps it as a rebuild does, also when the
    fact that held it goes or moves back)."""
    part = MemoryStore(db_url).partition(IDENT)
    part.append_many(old_cup())
    consolidation_pass(part, CONFIG)
    patched = GroundingIndex(IDENT, part.facts(), stale_half_life_s=HALF_LIFE_S)
    part.append_many(mug(200 * DAY_S))
    report = consolidation_pass(part, CONFIG)
    facts = part.facts()
    touched = {(c.kind, c.key) for c in report.changes}
    patched = patched.with_changes([f for f in facts if (f.kind, f.key) in touched])
    shuffled = list(facts)
    random.Random(7).shuffle(shuffled)
    rebuilt = [GroundingIndex(IDENT, order, stale_half_life_s=HALF_LIFE_S)
               for order in (facts, facts[::-1], shuffled)]
    requests = [GroundingRequest(GRASP, target, min_confidence=confidence)
                for target in ("old_cup", "mug", "") for confidence in (0.0, 0.5)]
    for index in rebuilt:
        assert index.newest_evidence_ns == patched.newest_evidence_ns == \
            max(f.last_updated_ns for f in facts)
        for request in requests:
            assert index.lookup(request) == patched.lookup(request), request
    # The facts that held the newest time move back (say, an invalidation re-dated
    # them): the newest is what a rebuild finds, not the old maximum.
    newest = patched.newest_evidence_ns
    moved = [replace(f, last_updated_ns=f.last_updated_ns - int(100 * DAY_S * 1e9))
             for f in facts if f.last_updated_ns == newest]
    after = patched.with_changes(moved)
    assert after.newest_evidence_ns == GroundingIndex(
        IDENT, list(after.facts.values())).newest_evidence_ns < newest
    assert patched.newest_evidence_ns == newest  # the old index is left as it was


def test_an_operators_fact_neither_decays_nor_dates_the_evidence(facts):
    """An override's stamp is the operator's clock, not the robot's evidence: a fact the
    operator set years ahead leaves every other fact's age alone, and is served as set."""
    rate_fact = next(f for f in facts if f.kind == "skill_success_rate" and "mug" in f.key)
    operator = replace(rate_fact, key="manipulation.grasp + vase + sim_relaxed",
                       rule_version=OPERATOR_RULE_VERSION,
                       last_updated_ns=rate_fact.last_updated_ns + int(3650 * DAY_S * 1e9))
    with_operator = GroundingIndex(IDENT, [*facts, operator], stale_half_life_s=HALF_LIFE_S)
    without = GroundingIndex(IDENT, facts, stale_half_life_s=HALF_LIFE_S)
    assert with_operator.newest_evidence_ns == without.newest_evidence_ns
    assert with_operator.served(operator) is operator
    old = replace(operator, last_updated_ns=0)
    assert GroundingIndex(IDENT, [*facts, old], stale_half_life_s=HALF_LIFE_S).served(old) is old


def test_zero_half_life_serves_the_stored_facts(facts):
    index = GroundingIndex(IDENT, facts, stale_half_life_s=0.0)
    answer = index.lookup(GroundingRequest(GRASP, "old_cup"))
    assert set(answer.facts) <= set(facts) and "stale" not in answer.reason


# -- a contested success rate -----------------------------------------------------------
@pytest.fixture
def contested(db_url):
    """glass_cup: an active success rate and failure pattern; then the rate contested (as
    a pass marks it when recent evidence disagrees with the older), the pattern active."""
    part = MemoryStore(db_url).partition(IDENT)
    part.append_many([result(i, success=i >= 4, force=25.0 if i >= 4 else 5.0,
                             zone="shelf_b", observations={"mass_kg": 0.2})
                      for i in range(16)])
    consolidation_pass(part, CONFIG)
    facts = part.facts()
    assert {f.kind for f in facts if f.status == "active"} >= {"skill_success_rate",
                                                               "interaction_pattern"}
    return [replace(f, status="contested") if f.kind == "skill_success_rate" else f
            for f in facts]


def test_a_contested_rate_is_never_left_out_of_an_ok(contested):
    index = GroundingIndex(IDENT, contested)
    answer = index.lookup(GroundingRequest(GRASP, "glass_cup", "sim_relaxed", zone="shelf_b"))
    assert (answer.status, answer.reason_code) == (ABSTAIN, "contested")
    assert answer.reason == ("evidence about manipulation.grasp on glass_cup in sim_relaxed "
                             "is contested: its success rate [manipulation.grasp + glass_cup "
                             "+ sim_relaxed] disagrees with itself; held back with it: "
                             "1 active interaction_pattern")
    # The active context facts ride along; no fact of the skill does.
    assert {f.kind for f in answer.facts} == {"object_property", "zone_risk"}
    # Any environment: the same.
    assert index.lookup(GroundingRequest(GRASP, "glass_cup")).reason_code == "contested"
    # Asked for the failure pattern alone, it is served.
    pattern = index.lookup(GroundingRequest(GRASP, "glass_cup",
                                            fact_kinds=("interaction_pattern",)))
    assert pattern.status == OK and [f.kind for f in pattern.facts] == ["interaction_pattern"]


def test_a_contested_rate_lends_nothing_by_analogy(contested):
    index = GroundingIndex(IDENT, contested)
    answer = index.lookup(GroundingRequest(GRASP, "glass_jar", allow_analogies=True,
                                           target_properties=(("mass_kg", 0.2),)))
    assert answer.status == ABSTAIN and answer.analogies == ()

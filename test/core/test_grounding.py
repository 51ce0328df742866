import pytest

from robot_memory.consolidation import RulesConfig, consolidation_pass
from robot_memory.grounding.index import ABSTAIN, OK, GroundingIndex, GroundingRequest
from robot_memory.grounding.request import INVALID_REQUEST
from robot_memory.store import MemoryStore

from helpers import result_event as result

IDENT = "d" * 64


@pytest.fixture
def index(db_url):
    part = MemoryStore(db_url).partition(IDENT)
    part.append_many([result(i, success=i >= 4, force=25.0 if i >= 4 else 5.0,
                             reason="" if i >= 4 else "slipped") for i in range(16)])
    part.append_many([result(100 + i, target="mug") for i in range(2)])
    consolidation_pass(part, RulesConfig(promotion_min_observations=3))
    return GroundingIndex(IDENT, part.facts())


def test_known_key_answers_with_the_recommended_force(index):
    answer = index.lookup(GroundingRequest("manipulation.grasp", "glass_cup", "sim_relaxed"))
    assert answer.status == OK
    assert [f.confidence for f in answer.facts] == sorted(
        (f.confidence for f in answer.facts), reverse=True)
    rate = next(f for f in answer.facts if f.kind == "skill_success_rate")
    assert rate.value["recommended_parameters"]["force_n"]["median"] == 25.0
    assert {f.kind for f in answer.facts} == {"skill_success_rate", "interaction_pattern",
                                              "zone_risk"}


def test_empty_environment_means_any(index):
    answer = index.lookup(GroundingRequest("manipulation.grasp", "glass_cup",
                                           fact_kinds=("skill_success_rate",)))
    assert answer.status == OK and len(answer.facts) == 1


@pytest.mark.parametrize("request_, code", [
    (GroundingRequest("manipulation.push", "glass_cup"), "no_fact"),
    (GroundingRequest("manipulation.grasp", "glass_cup", "ward_3",
                      fact_kinds=("skill_success_rate",)), "no_fact"),
    (GroundingRequest("manipulation.grasp", "mug"), "only_candidates"),
    (GroundingRequest("manipulation.grasp", "glass_cup", min_confidence=0.99),
     "below_confidence"),
])
def test_abstains_with_a_reason_a_planner_can_branch_on(index, request_, code):
    answer = index.lookup(request_)
    assert (answer.status, answer.reason_code) == (ABSTAIN, code)
    assert answer.facts == ()


@pytest.mark.parametrize("request_, field", [
    (GroundingRequest(""), "skill_id"),
    (GroundingRequest("grasp", fact_kinds=("nonsense",)), "fact_kinds"),
    (GroundingRequest("grasp", min_confidence=1.5), "min_confidence"),
    (GroundingRequest("grasp", min_confidence=float("nan")), "min_confidence"),
    (GroundingRequest("grasp", target_class="a b"), "target_class"),
    (GroundingRequest("grasp", max_results=10_000), "max_results"),
])
def test_invalid_requests_name_the_field(index, request_, field):
    answer = index.lookup(request_)
    assert answer.status == INVALID_REQUEST and answer.reason.startswith(field)


def test_with_changes_equals_a_rebuild_and_leaves_the_old_index_alone(db_url):
    part = MemoryStore(db_url).partition(IDENT)
    part.append_many([result(i, target=f"t{i % 3}", success=i % 4 != 0) for i in range(30)])
    consolidation_pass(part)
    old = GroundingIndex(IDENT, part.facts())
    before = old.lookup(GroundingRequest("manipulation.grasp", "t1"))
    part.append_many([result(100 + i, target="t1", success=False) for i in range(10)]
                     + [result(200 + i, target="t9") for i in range(5)])
    report = consolidation_pass(part)
    changed = [f for f in part.facts() if (f.kind, f.key) in
               {(c.kind, c.key) for c in report.changes}]
    patched = old.with_changes(changed)
    rebuilt = GroundingIndex(IDENT, part.facts())
    for target in ("t0", "t1", "t9", ""):
        request = GroundingRequest("manipulation.grasp", target)
        assert patched.lookup(request) == rebuilt.lookup(request)
    assert old.lookup(GroundingRequest("manipulation.grasp", "t1")) == before


def test_with_changes_keeps_long_lists_in_rank_order(db_url):
    """A skill's list longer than the index keeps ranked (hundreds of facts): pass after
    pass, the patched index answers every question as a rebuild does, in the same order
    (ranks tie often: confidences repeat), new targets and facts leaving the list
    included."""
    part = MemoryStore(db_url).partition(IDENT)
    config = RulesConfig(promotion_min_observations=2)
    part.append_many([result(i, target=f"t{i % 90}", env=f"e{i % 2}", zone=f"z{i % 3}",
                             success=i % 5 != 0, force=float(5 * (i % 4)),
                             observations={"mass_kg": (i % 7) / 10}) for i in range(400)])
    consolidation_pass(part, config)
    index = GroundingIndex(IDENT, part.facts())
    requests = [GroundingRequest("manipulation.grasp", max_results=100),
                GroundingRequest("manipulation.grasp", min_confidence=0.3, max_results=100),
                GroundingRequest("manipulation.grasp", environment="e1", max_results=100),
                GroundingRequest("manipulation.grasp", zone="z2", max_results=100),
                GroundingRequest("manipulation.grasp", "t7"),
                GroundingRequest("manipulation.grasp", "t200")]
    assert len(index.lookup(requests[0]).facts) > 64  # the long list is what is tested
    for round_ in range(4):
        start = 1000 + 100 * round_
        part.append_many([result(start + i, target=f"t{(i * 7 + round_) % (95 + 40 * round_)}",
                                 env=f"e{(i + round_) % 2}", zone=f"z{i % 3}",
                                 success=(i + round_) % 3 != 0, force=float(5 * (i % 4)))
                          for i in range(60)])
        report = consolidation_pass(part, config)
        touched = {(c.kind, c.key) for c in report.changes}
        facts = part.facts()
        index = index.with_changes([f for f in facts if (f.kind, f.key) in touched])
        rebuilt = GroundingIndex(IDENT, facts)
        for request in requests:
            assert index.lookup(request) == rebuilt.lookup(request), (round_, request)


@pytest.fixture
def context_index(db_url):
    """Grasps of glass_cup in shelf_b (weighed each time); nothing else was ever tried."""
    part = MemoryStore(db_url).partition(IDENT)
    part.append_many([result(i, success=i % 4 != 0, zone="shelf_b",
                             observations={"mass_kg": 0.2}) for i in range(16)])
    consolidation_pass(part, RulesConfig(promotion_min_observations=3))
    return GroundingIndex(IDENT, part.facts())


@pytest.mark.parametrize("request_, context_kinds", [
    # The case: docking was never tried; glass_cup's mass is known.
    (GroundingRequest("navigation.dock", "glass_cup"), {"object_property"}),
    (GroundingRequest("navigation.dock", zone="shelf_b"), {"zone_risk"}),
    (GroundingRequest("navigation.dock", "glass_cup", zone="shelf_b"),
     {"object_property", "zone_risk"}),
    # Grasping is known, but not on this target: the target's context is no answer.
    (GroundingRequest("manipulation.grasp", "mug", zone="shelf_b"), {"zone_risk"}),
])
def test_context_facts_alone_are_no_fact_and_ride_along(context_index, request_,
                                                        context_kinds):
    answer = context_index.lookup(request_)
    assert (answer.status, answer.reason_code) == (ABSTAIN, "no_fact")
    assert {f.kind for f in answer.facts} == context_kinds
    assert all(f.status == "active" for f in answer.facts)


def test_context_facts_ride_along_only_if_they_reach_min_confidence(context_index):
    answer = context_index.lookup(GroundingRequest("navigation.dock", "glass_cup",
                                                   min_confidence=0.999))
    assert (answer.status, answer.reason_code, answer.facts) == (ABSTAIN, "no_fact", ())


def test_skill_facts_make_the_answer_and_context_joins_them(context_index):
    answer = context_index.lookup(GroundingRequest("manipulation.grasp", "glass_cup",
                                                   zone="shelf_b"))
    assert answer.status == OK
    assert {f.kind for f in answer.facts} == {"skill_success_rate", "interaction_pattern",
                                              "object_property", "zone_risk"}
    assert [f.confidence for f in answer.facts] == sorted(
        (f.confidence for f in answer.facts), reverse=True)


def test_a_request_for_context_kinds_only_is_answered_by_them(context_index):
    answer = context_index.lookup(GroundingRequest("navigation.dock", "glass_cup",
                                                   fact_kinds=("object_property",)))
    assert answer.status == OK and [f.kind for f in answer.facts] == ["object_property"]
    answer = context_index.lookup(GroundingRequest(
        "navigation.dock", "glass_cup", fact_kinds=("object_property", "skill_success_rate")))
    assert (answer.status, answer.reason_code) == (ABSTAIN, "no_fact")
    assert [f.kind for f in answer.facts] == ["object_property"]

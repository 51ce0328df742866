"""Analogies: a target the robot never handled, answered with the nearest known targets'
facts under status ANALOGY; deterministic, labelled, audited and never the robot's own."""

import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_memory.grounding.analogies import AnalogySettings, KnownProperties, robust_scale
from robot_memory.grounding.audit import consultation_payload
from robot_memory.canonical import canonical_json
from robot_memory.consolidation import RulesConfig, consolidation_pass
from robot_memory.event_kinds import FACT_CONSULTATION
from robot_memory.grounding.explain import explain_fact, find_fact, format_explanation
from robot_memory.grounding.index import ABSTAIN, ANALOGY, OK, GroundingIndex, GroundingRequest
from robot_memory.grounding.request import INVALID_REQUEST
from robot_memory.operation.parameters import node_defaults
from robot_memory.grounding.limits import GROUND, over_limit
from robot_memory.store import FactRow, MemoryStore, NewEvent

from helpers import result_event as result

IDENT = "a" * 64
GRASP = "manipulation.grasp"
# Known targets: mass and the force that works. plate was weighed while pushing it, never
# grasped: it is measured, but has no fact of the grasp to lend.
KNOWN = {"glass_cup": (0.20, 25.0), "mug": (0.35, 30.0), "dumbbell": (2.0, 80.0)}


@pytest.fixture
def part(db_url):
    part = MemoryStore(db_url).partition(IDENT)
    events = [result(len(KNOWN) * i + j, target=target, force=force,
                     observations={"mass_kg": mass})
              for i in range(6) for j, (target, (mass, force)) in enumerate(KNOWN.items())]
    events += [result(100 + i, skill="manipulation.push", target="plate",
                      observations={"mass_kg": 0.5}) for i in range(6)]
    part.append_many(events)
    consolidation_pass(part, RulesConfig(promotion_min_observations=3))
    return part


@pytest.fixture
def index(part):
    return GroundingIndex(IDENT, part.facts())


def ask(target="glass_jar", mass=0.22, **fields):
    properties = (("mass_kg", mass),) if mass is not None else ()
    return GroundingRequest(GRASP, target, allow_analogies=True,
                            target_properties=properties, **fields)


def test_an_unseen_target_gets_the_nearest_known_targets_facts_labelled(index):
    answer = index.lookup(ask())
    assert (answer.status, answer.reason_code) == (ANALOGY, "no_fact")
    assert "not this robot's knowledge of glass_jar" in answer.reason
    assert answer.facts == ()  # nothing of the robot's own about glass_jar
    (analogy,) = answer.analogies  # mug is 0.585 away, beyond the default 0.5
    assert analogy.target_class == "glass_cup"
    (compared,) = analogy.properties
    assert (compared.name, compared.query_value, compared.query_source,
            compared.case_value) == ("mass_kg", 0.22, "request", 0.20)
    # Known masses 0.2, 0.35, 0.5, 2.0: median 0.425, MAD 0.15.
    assert compared.scale.source == "mad"
    assert compared.scale.value == pytest.approx(1.4826 * 0.15)
    assert analogy.distance == round(0.02 / (1.4826 * 0.15), 9)
    assert compared.case_fact.kind == "object_property"
    assert {f.kind for f in analogy.facts} == {"skill_success_rate"}
    (rate,) = analogy.facts
    assert rate.key == "manipulation.grasp + glass_cup + sim_relaxed"
    assert rate.value["recommended_parameters"]["force_n"]["median"] == 25.0


def test_the_k_nearest_come_nearest_first(index):
    answer = index.lookup(ask(mass=0.30, max_analogies=5),
                          AnalogySettings(max_distance=10.0))
    # plate (0.5) is nearer than dumbbell but was never grasped: skipped.
    assert [a.target_class for a in answer.analogies] == ["mug", "glass_cup", "dumbbell"]
    assert [a.distance for a in answer.analogies] == sorted(a.distance for a in answer.analogies)
    answer = index.lookup(ask(mass=0.30), AnalogySettings(max_distance=10.0, k=1))
    assert [a.target_class for a in answer.analogies] == ["mug"]


def test_a_planner_that_does_not_ask_gets_todays_answer(index):
    plain = GroundingRequest(GRASP, "glass_jar")
    assert index.lookup(replace(ask(), allow_analogies=False)) == index.lookup(plain)
    assert (index.lookup(plain).status, index.lookup(plain).reason_code) == (ABSTAIN, "no_fact")
    assert index.lookup(plain).analogies == ()


def test_a_known_target_is_answered_from_its_own_facts(index):
    answer = index.lookup(ask(target="glass_cup", mass=2.0))
    assert answer == index.lookup(GroundingRequest(GRASP, "glass_cup"))
    assert answer.status == OK and answer.analogies == ()


@pytest.mark.parametrize("request_, why", [
    (ask(mass=5.0), "no known target with a servable fact of manipulation.grasp is within "
                    "distance 0.5 of glass_jar (on mass_kg)"),
    (ask(mass=None), "no property of glass_jar (measured: none) was measured"),
    (replace(ask(), target_properties=(("height_m", 0.1),)),
     "no property of glass_jar (measured: height_m) was measured"),
])
def test_nothing_close_enough_abstains_no_close_case(index, request_, why):
    answer = index.lookup(request_)
    assert (answer.status, answer.reason_code) == (ABSTAIN, "no_close_case")
    assert why in answer.reason and answer.analogies == ()


def test_a_server_with_analogies_off_answers_no_fact(index):
    answer = index.lookup(ask(), AnalogySettings(enabled=False))
    assert (answer.status, answer.reason_code) == (ABSTAIN, "no_fact")
    assert answer.reason.endswith("analogies are off on this server")


def test_the_targets_own_measurement_is_compared_and_the_request_overrides_it(index):
    # plate was weighed (0.5 kg) but never grasped: its own fact is the query.
    answer = index.lookup(ask(target="plate", mass=None), AnalogySettings(max_distance=2.0))
    assert answer.status == ANALOGY
    assert [f.kind for f in answer.facts] == ["object_property"]  # its own context fact
    compared = answer.analogies[0].properties[0]
    assert (compared.query_value, compared.query_source) == (0.5, "fact")
    assert answer.analogies[0].target_class == "mug"
    answer = index.lookup(ask(target="plate", mass=0.21))
    assert answer.analogies[0].properties[0].query_source == "request"
    assert answer.analogies[0].target_class == "glass_cup"


def test_lent_facts_follow_the_requests_filters(index):
    assert index.lookup(ask(environment="ward_3")).reason_code == "no_close_case"
    answer = index.lookup(ask(fact_kinds=("skill_success_rate", "object_property")))
    assert [f.kind for f in answer.analogies[0].facts] == ["skill_success_rate"]
    assert index.lookup(ask(min_confidence=0.999)).reason_code == "no_close_case"


@pytest.mark.parametrize("request_, field", [
    (replace(ask(), target_properties=(("mass_kg", math.nan),)), "target_properties[0]"),
    (replace(ask(), target_properties=(("mass_kg", math.inf),)), "target_properties[0]"),
    (replace(ask(), target_properties=(("mass_kg", 1.0), ("mass_kg", 2.0))),
     "target_properties[1]"),
    (replace(ask(), target_properties=(("a b", 1.0),)), "target_properties[0]"),
    (replace(ask(), target_properties=tuple((f"p{i}", 1.0) for i in range(33))),
     "target_properties"),
    (ask(max_analogies=11), "max_analogies"),
])
def test_invalid_analogy_fields_are_named(index, request_, field):
    answer = index.lookup(request_)
    assert answer.status == INVALID_REQUEST and answer.reason.startswith(field + ":")


def test_analogies_are_never_written_to_the_robots_facts(part, index):
    before = part.facts()
    answer = index.lookup(ask())
    part.append_many([NewEvent(FACT_CONSULTATION, consultation_payload(
        "c1", "/planner", "pick-jar", {"skill_id": GRASP, "target_class": "glass_jar"},
        answer), 10**12)])
    report = consolidation_pass(part, RulesConfig(promotion_min_observations=3))
    assert report.changes == [] and part.facts() == before
    assert not any("glass_jar" in f.key for f in part.facts())
    assert GroundingIndex(IDENT, part.facts()).lookup(
        GroundingRequest(GRASP, "glass_jar")).reason_code == "no_fact"


def test_audit_and_explain_say_an_analogy_was_served_and_from_which_facts(part, index):
    answer = index.lookup(ask())
    payload = consultation_payload("c1", "/planner", "pick-jar",
                                   {"skill_id": GRASP, "target_class": "glass_jar"}, answer)
    assert payload["facts"] == []  # nothing was served as the robot's own
    (lent,) = payload["analogies"]
    rate = find_fact(part, kind="skill_success_rate",
                     key="manipulation.grasp + glass_cup + sim_relaxed")
    assert lent["target_class"] == "glass_cup"
    assert [f["fact_id"] for f in lent["facts"]] == [rate.id]
    assert lent["properties"][0]["key"] == "glass_cup + mass_kg"
    canonical_json(payload)  # the log can hold it
    part.append_many([NewEvent(FACT_CONSULTATION, payload, 10**12)])
    for fact in (rate, find_fact(part, kind="object_property", key="glass_cup + mass_kg")):
        (consulted,) = explain_fact(part, fact)["consultations"]
        assert (consulted["served_as"], consulted["for_target"]) == ("analogy", "glass_jar")
    text = format_explanation(explain_fact(part, rate))
    assert "served in 1 grounding consultations (1 as an analogy for another target)" in text
    assert "pick-jar (consultation c1), as an analogy for glass_jar" in text


def test_a_consultation_without_analogies_is_recorded_as_before(index):
    answer = index.lookup(GroundingRequest(GRASP, "glass_cup"))
    payload = consultation_payload("c", "r", "i", {}, answer)
    assert set(payload) == {"consultation_id", "requester", "intent_id", "status",
                            "reason_code", "query", "facts"}


def test_a_patched_index_serves_the_analogies_of_a_rebuilt_one(part, index):
    index.lookup(ask())  # builds the property table, so the patch rebuilds it
    part.append_many([result(300 + i, target="vase", force=21.0,
                             observations={"mass_kg": 0.215}) for i in range(5)])
    report = consolidation_pass(part, RulesConfig(promotion_min_observations=3))
    changed = [f for f in part.facts()
               if (f.kind, f.key) in {(c.kind, c.key) for c in report.changes}]
    patched, rebuilt = index.with_changes(changed), GroundingIndex(IDENT, part.facts())
    assert patched.lookup(ask()) == rebuilt.lookup(ask())
    assert patched.lookup(ask()).analogies[0].target_class == "vase"
    assert index.lookup(ask()).analogies[0].target_class == "glass_cup"  # old one unchanged


@pytest.mark.parametrize("values, source, scale", [
    ([1.0, 2.0, 3.0, 4.0, 100.0], "mad", 1.4826),
    ([1.0, 1.0, 1.0, 5.0], "mean_abs_dev", 1.2533 * 1.0),
    ([2.0, 2.0], "abs_median", 2.0),
    ([-3.0], "abs_median", 3.0),
    ([0.0, 0.0, 0.0], "unit", 1.0),
])
def test_robust_scale_and_its_fallbacks(values, source, scale):
    found = robust_scale(np.array(values))
    assert found.source == source and found.value == pytest.approx(scale)


def test_analogy_settings_defaults_are_the_parameter_table(index):
    defaults = node_defaults("grounding_server")
    assert AnalogySettings() == AnalogySettings(
        enabled=defaults["analogies_enabled"],
        max_distance=defaults["analogy_max_distance"], k=defaults["analogy_k"])


def test_request_limits_count_target_properties_and_their_names():
    texts = {name: "" for name, limit in GROUND.items() if not isinstance(limit, tuple)}
    request = SimpleNamespace(**texts, fact_kinds=[],
                              target_properties=[SimpleNamespace(key="m" * 65)])
    assert over_limit(request, GROUND) == ("target_properties[0]",
                                           "65 characters, more than 64")
    request.target_properties = [SimpleNamespace(key="m")] * 33
    assert over_limit(request, GROUND) == ("target_properties", "33 entries, more than 32")


# -- synthetic indexes: the answer against a brute-force reference ------------------------

def _fact(row_id: int, kind: str, key: str, value: dict) -> FactRow:
    return FactRow(id=row_id, kind=kind, key=key, value_json=canonical_json(value),
                   status="active", confidence=0.9, n_observations=10, rule_version="v1",
                   last_supporting_event_id=row_id, last_updated_ns=0)


def synthetic_facts(masses: dict[str, float], tried: set[str]) -> list[FactRow]:
    facts = []
    for target, mass in sorted(masses.items()):
        facts.append(_fact(len(facts) + 1, "object_property", f"{target} + mass_kg",
                           {"target_class": target, "property": "mass_kg", "n": 10,
                            "mean": mass, "band": {"median": mass, "q1": mass, "q3": mass}}))
        if target in tried:
            facts.append(_fact(len(facts) + 1, "skill_success_rate",
                               f"{GRASP} + {target} + sim",
                               {"skill_id": GRASP, "target_class": target,
                                "environment": "sim", "rate": 0.9}))
    return facts


def reference_analogies(masses, tried, query_mass, max_distance, k):
    """What the answer must be, computed the plain way."""
    values = np.array(list(masses.values()))
    scale = robust_scale(values).value
    cases = sorted((round(abs(query_mass - mass) / scale, 9), target)
                   for target, mass in masses.items() if target in tried)
    return [(target, distance) for distance, target in cases if distance <= max_distance][:k]


targets = st.dictionaries(st.sampled_from([f"t{i:02d}" for i in range(30)]),
                          st.sampled_from([0.1, 0.2, 0.25, 0.3, 0.5, 1.0, 2.0]),
                          min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(masses=targets, data=st.data())
def test_answers_equal_the_reference_whatever_the_fact_order(masses, data):
    tried = set(data.draw(st.lists(st.sampled_from(sorted(masses)), unique=True)))
    query_mass = data.draw(st.sampled_from([0.0, 0.2, 0.27, 0.4, 1.5, 3.0]))
    max_distance = data.draw(st.sampled_from([0.0, 0.5, 1.0, 5.0, 1e6]))
    k = data.draw(st.integers(1, 10))
    facts = synthetic_facts(masses, tried)
    shuffled = data.draw(st.permutations(facts))
    request = GroundingRequest(GRASP, "new_object", allow_analogies=True,
                               target_properties=(("mass_kg", query_mass),), max_analogies=k)
    config = AnalogySettings(max_distance=max_distance)
    answer = GroundingIndex(IDENT, facts).lookup(request, config)
    assert GroundingIndex(IDENT, shuffled).lookup(request, config) == answer
    expected = reference_analogies(masses, tried, query_mass, max_distance, k)
    assert [(a.target_class, a.distance) for a in answer.analogies] == expected
    assert answer.status == (ANALOGY if expected else ABSTAIN)
    assert all(f.kind == "skill_success_rate" and a.target_class in f.key
               for a in answer.analogies for f in a.facts)


def test_equal_distances_go_by_target_class():
    masses = {"b_cup": 0.3, "a_cup": 0.1, "c_cup": 0.6}  # 0.1 and 0.3 are equally far
    index = GroundingIndex(IDENT, synthetic_facts(masses, set(masses)))
    request = GroundingRequest(GRASP, "new_object", allow_analogies=True,
                               target_properties=(("mass_kg", 0.2),))
    answer = index.lookup(request, AnalogySettings(max_distance=10.0))
    assert [a.target_class for a in answer.analogies] == ["a_cup", "b_cup", "c_cup"]
    assert answer.analogies[0].distance == answer.analogies[1].distance


def test_a_patched_property_table_equals_a_rebuilt_one():
    masses = {"a_cup": 0.1, "b_cup": 0.3, "c_cup": 0.6, "d_cup": 0.9}
    facts = synthetic_facts(masses, set(masses))
    old = KnownProperties(facts)
    by_key = {(f.kind, f.key): f for f in facts}
    gone = replace(by_key[("object_property", "b_cup + mass_kg")], status="invalidated")
    moved = synthetic_facts({"c_cup": 0.2}, set())[0]
    moved = replace(moved, id=by_key[("object_property", "c_cup + mass_kg")].id)
    added = replace(synthetic_facts({"e_cup": 0.4}, set())[0], id=99)
    changed = [gone, moved, added]
    for fact in changed:
        by_key[(fact.kind, fact.key)] = fact
    patched, rebuilt = old.with_changes(changed), KnownProperties(by_key.values())
    assert patched.targets == rebuilt.targets == ["a_cup", "c_cup", "d_cup", "e_cup"]
    assert patched.scales == rebuilt.scales
    assert np.array_equal(patched.columns["mass_kg"], rebuilt.columns["mass_kg"])
    assert old.targets == ["a_cup", "b_cup", "c_cup", "d_cup"]  # left as it was
    assert old.properties_of("c_cup")["mass_kg"][0] == 0.6


def test_a_value_near_the_float_limit_is_far_from_everything(index):
    answer = index.lookup(ask(mass=1e308), AnalogySettings(max_distance=1e6))
    assert (answer.status, answer.reason_code) == (ABSTAIN, "no_close_case")


# -- several properties, some not measured on every target: the search against a
# reference that follows the module docstring target by target ----------------------------

def property_facts(measured: dict[str, dict[str, float]]) -> list[FactRow]:
    return [_fact(i + 1, "object_property", f"{target} + {name}",
                  {"target_class": target, "property": name, "n": 10, "mean": value,
                   "band": {"median": value, "q1": value, "q3": value}})
            for i, (target, name, value) in enumerate(
                (t, n, v) for t, props in sorted(measured.items()) for n, v in props.items())]


def reference_nearest(measured, query, max_distance):
    """(target, distance, names compared) within max_distance, nearest first, ties by
    target: one target at a time, in plain floats."""
    names = sorted({name for props in measured.values() for name in props})
    scales = {name: robust_scale(np.array([props[name] for props in measured.values()
                                           if name in props])).value for name in names}
    compared = [name for name in sorted(query) if name in scales]
    found = []
    for target, props in measured.items():
        shared = [name for name in compared if name in props]
        if not shared:
            continue
        total = 0.0
        for name in shared:
            z = (props[name] - query[name]) / scales[name]
            total += z * z
        distance = float(np.round(np.float64(math.sqrt(total / len(shared))), 9))
        if distance <= max_distance:
            found.append((distance, target, tuple(shared)))
    return [(target, distance, shared) for distance, target, shared in sorted(found)]


property_values = st.sampled_from([0.1, 0.2, 0.25, 0.3, 0.5, 1.0, 2.0, 7.5])
measured_targets = st.dictionaries(
    st.sampled_from([f"t{i:02d}" for i in range(25)]),
    st.dictionaries(st.sampled_from(["height_m", "mass_kg", "width_m"]), property_values,
                    min_size=1),
    min_size=1, max_size=25)


@settings(max_examples=200, deadline=None)
@given(measured=measured_targets, data=st.data())
def test_nearest_over_several_properties_equals_the_reference(measured, data):
    query = data.draw(st.dictionaries(st.sampled_from(["height_m", "mass_kg", "width_m"]),
                                      st.sampled_from([0.0, 0.2, 0.27, 0.4, 1.5, 3.0]),
                                      min_size=1))
    # Limits exactly at a distance found: whether a row is in must not depend on rounding.
    at_a_distance = [d for _, d, _ in reference_nearest(measured, query, math.inf)]
    max_distance = data.draw(st.sampled_from([0.0, 0.5, 1e6, *at_a_distance]))
    known = KnownProperties(property_facts(measured))
    found = [(n.target_class, n.distance, tuple(p.name for p in n.properties))
             for n in known.nearest({name: (value, "request") for name, value in query.items()},
                                    max_distance, exclude="")]
    assert found == reference_nearest(measured, query, max_distance)


def test_a_patch_that_only_moves_values_equals_a_rebuilt_table():
    measured = {"a_cup": {"mass_kg": 0.1, "width_m": 0.05}, "b_cup": {"mass_kg": 0.3},
                "c_cup": {"mass_kg": 0.6, "width_m": 0.08}, "d_cup": {"width_m": 0.2}}
    facts = property_facts(measured)
    by_key = {(f.kind, f.key): f for f in facts}
    old = KnownProperties(facts)

    def moved(key: str, median: float) -> FactRow:
        fact = by_key[("object_property", key)]
        band = {"median": median, "q1": median, "q3": median}
        return replace(fact, value_json=canonical_json({**fact.value, "band": band}))

    # The same targets measured on the same properties: only values move.
    changed = [moved("b_cup + mass_kg", 0.35), moved("c_cup + width_m", 0.3)]
    for fact in changed:
        by_key[(fact.kind, fact.key)] = fact
    patched, rebuilt = old.with_changes(changed), KnownProperties(by_key.values())
    assert patched.targets is old.targets  # patched, not rebuilt
    assert patched.targets == rebuilt.targets and patched.scales == rebuilt.scales
    assert patched.scales != old.scales  # the moved values moved the scales
    for name in rebuilt.columns:
        assert np.array_equal(patched.columns[name], rebuilt.columns[name], equal_nan=True)
    query = {"mass_kg": (0.32, "request"), "width_m": (0.1, "request")}
    assert list(patched.nearest(query, 10.0, "")) == list(rebuilt.nearest(query, 10.0, ""))
    assert old.properties_of("b_cup")["mass_kg"][0] == 0.3  # left as it was
    assert old.columns["mass_kg"][1] == 0.3


def test_own_attempts_too_few_to_serve_still_get_analogies_and_keep_their_reason(part):
    # glass_jar tried twice: a candidate fact of the robot's own, not servable yet.
    part.append_many([result(200 + i, target="glass_jar", force=5.0, success=False)
                      for i in range(2)])
    consolidation_pass(part, RulesConfig(promotion_min_observations=3))
    index = GroundingIndex(IDENT, part.facts())
    assert index.lookup(GroundingRequest(GRASP, "glass_jar")).reason_code == "only_candidates"
    answer = index.lookup(ask())
    assert (answer.status, answer.reason_code) == (ANALOGY, "only_candidates")
    assert [a.target_class for a in answer.analogies] == ["glass_cup"]
    assert all(f.kind != "skill_success_rate" for f in answer.facts)  # its own: context only
    far = index.lookup(ask(mass=5.0))
    assert (far.status, far.reason_code) == (ABSTAIN, "only_candidates")
    assert "; no analogy: no known target" in far.reason and far.analogies == ()

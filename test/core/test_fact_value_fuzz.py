"""Any JSON value, for any fact kind, at every way in: the override path refuses it or
takes it, a value in the log is skipped or applied, and neither the pass, replay, the
published encoding (served_fields, fact_element) nor the grounding index ever raises
for it. A value that has its kind's shape is read by every consumer without fault.

Values are drawn near the shapes (a well-shaped value with one field replaced, dropped
or added) as well as anywhere, so that both sides of each check are reached."""

import hashlib
import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_memory.grounding.analogies import KnownProperties
from robot_memory.consolidation import consolidation_pass, facts_snapshot, replay_snapshot
from robot_memory.consolidation import overrides as ov
from robot_memory.consolidation.diff import _flat
from robot_memory.consolidation.fact_schemas import (SCHEMAS, operator_fact_problem,
                                                     stored_fact_problem, value_problem)
from robot_memory.event_kinds import OVERRIDE
from robot_memory.grounding.served import served_fields
from robot_memory.wire.semantic_fact import fact_element
from robot_memory.grounding.index import GroundingIndex, GroundingRequest
from robot_memory.grounding.priors import PriorFact, PriorIndex, _counts
from robot_memory.store import FactRow, MemoryStore

WHO = {"operator": "ops", "reason": "fuzz"}
SHAPED = {
    "skill_success_rate": {"skill_id": "manipulation.grasp", "target_class": "glass_cup",
                           "environment": "sim", "rate": 0.75, "n": 4, "successes": 3,
                           "recommended_parameters": {"force_n": {"median": 25,
                                                                  "q1": 20, "q3": 30}}},
    "interaction_pattern": {"skill_id": "manipulation.grasp", "target_class": "glass_cup",
                            "failure_reason": "slipped", "share_of_failures": 0.5,
                            "failure_parameters": {"force_n": {"median": 10}}},
    "object_property": {"target_class": "glass_cup", "property": "mass_kg",
                        "band": {"median": 0.3, "q1": 0.2, "q3": 0.4}},
    "zone_risk": {"scope": "zone", "zone": "dock", "failure_rate": 0.1},
}
KINDS = sorted(SHAPED)
FIELDS = sorted({name for schema in SCHEMAS.values() for name in schema.model_fields})

scalars = (st.none() | st.booleans() | st.integers() | st.integers(-2**70, 2**70)
           | st.floats(allow_nan=False) | st.text(max_size=6)
           | st.sampled_from(["", "zone", "environment", "median", "\ud800"]))
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(FIELDS + ["median", "q1", "x"]) | st.text(max_size=4),
                      inner, max_size=4), max_leaves=10)


@st.composite
def near_shapes(draw, kind):
    """A well-shaped value of `kind` with one field (or a band's field) replaced, dropped
    or added, or left as it is."""
    value = json.loads(json.dumps(SHAPED[kind]))
    target = value
    if draw(st.booleans()):
        bands = [band for field in ("recommended_parameters", "failure_parameters")
                 for band in value.get(field, {}).values()] + \
            ([value["band"]] if "band" in value else [])
        if bands:
            target = draw(st.sampled_from(bands))
    action = draw(st.sampled_from(["replace", "drop", "add", "keep"]))
    names = sorted(target)
    if action == "replace":
        target[draw(st.sampled_from(names))] = draw(json_values)
    elif action == "drop":
        del target[draw(st.sampled_from(names))]
    elif action == "add":
        target[draw(st.sampled_from(FIELDS) | st.text(max_size=4))] = draw(json_values)
    return value


def values_of(kind):
    return near_shapes(kind) | json_values


kinds_and_values = st.sampled_from(KINDS).flatmap(
    lambda kind: st.tuples(st.just(kind), values_of(kind)))
_identities = itertools.count()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return MemoryStore(f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'm.db'}")


def fresh(store):
    """A partition of its own per example (one store for the whole module)."""
    return store.partition(hashlib.sha256(str(next(_identities)).encode()).hexdigest())


def read_by_every_consumer(fact: FactRow, identity: str) -> None:
    """What each consumer reads of a fact it holds; raises if any cannot."""
    served_fields(fact.value)
    fact_element(fact, *served_fields(fact.peek_value()))
    index = GroundingIndex(identity, [fact])
    assert not index.left_out, index.left_out
    index.lookup(GroundingRequest("manipulation.grasp", "glass_cup", "sim",
                                  allow_analogies=True))
    index.with_changes([fact])
    KnownProperties([fact])
    _counts(fact.value)
    PriorIndex([PriorFact("a" * 64, "arm", "fuzz", fact)])
    _flat(fact.value)


SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
# Each example of these writes a log and runs a pass and a replay on disk.
LOG_SETTINGS = settings(SETTINGS, max_examples=40)


@SETTINGS
@given(kinds_and_values)
def test_the_override_path_refuses_or_takes_any_value(store, kind_value):
    kind, value = kind_value
    part = fresh(store)
    key = f"fuzz + {kind}"
    try:
        ov.record_override(part, "operator_fact", stamp_ns=1, kind=kind, key=key,
                           value_json=json.dumps(value), **WHO)
    except ov.OverrideError as refused:
        problem = value_problem(kind, value)
        assert problem is not None and problem.field.startswith(str(refused).split(":")[0])
        assert part.head()[0] == 0
        return
    assert value_problem(kind, value) is None
    report = consolidation_pass(part)
    assert report.applied and not report.ill_shaped and not report.fact_faults
    (fact,) = part.facts()
    assert (fact.kind, fact.key, fact.rule_version) == (kind, key, "operator/1")
    read_by_every_consumer(fact, part.identity_hash)
    assert replay_snapshot(part) == facts_snapshot(part)


@LOG_SETTINGS
@given(kinds_and_values, st.sampled_from([1.0, 0.5, 2.0, "1", None, True]))
def test_a_value_already_in_the_log_is_skipped_or_applied_never_fatal(store, kind_value,
                                                                      confidence):
    kind, value = kind_value
    part = fresh(store)
    payload = {"action": "operator_fact", **WHO, "fact_kind": kind, "fact_key": "k",
               "value": value, "confidence": confidence}
    try:
        event = part.append(OVERRIDE, payload, 1)
    except ValueError:  # text the log cannot store (a lone surrogate): never in a log
        return
    report = consolidation_pass(part)
    problem = operator_fact_problem(payload)
    if problem is None:
        (fact,) = part.facts()
        read_by_every_consumer(fact, part.identity_hash)
    else:
        assert [(s.event_id, s.problem) for s in report.ill_shaped] == [(event.id, problem)]
        assert part.facts() == []
    assert replay_snapshot(part) == facts_snapshot(part)


@LOG_SETTINGS
@given(st.dictionaries(st.sampled_from(["action", "fact_kind", "fact_key", "value",
                                        "confidence", "operator", "reason"]),
                       json_values | st.sampled_from(KINDS + ["operator_fact", "invalidate"]),
                       max_size=7))
def test_any_override_payload_in_the_log_is_skipped_or_applied(store, payload):
    """Whatever a hand wrote into an override event's fields."""
    part = fresh(store)
    try:
        event = part.append(OVERRIDE, payload, 1)
    except ValueError:  # text the log cannot store: never in a log
        return
    report = consolidation_pass(part)
    if payload.get("action") == "operator_fact" and operator_fact_problem(payload) is not None:
        assert [s.event_id for s in report.ill_shaped] == [event.id]
    for fact in part.facts():
        read_by_every_consumer(fact, part.identity_hash)
    assert replay_snapshot(part) == facts_snapshot(part)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(KINDS), json_values | st.sampled_from(
    [json.dumps(v) for v in SHAPED.values()]), st.sampled_from(["v1.0", "operator/1"]),
                          st.booleans()), min_size=1, max_size=6))
def test_the_index_and_the_encoding_take_any_stored_value_fact_by_fact(rows):
    """Stored rows (an older version's, a hand-edited one): any value_json, even not
    JSON. The index leaves out what it cannot read, and only that."""
    facts = []
    for i, (kind, value, rule_version, as_text) in enumerate(rows):
        text = value if isinstance(value, str) and as_text else json.dumps(value)
        facts.append(FactRow(id=i + 1, kind=kind, key=f"key {i}", value_json=text,
                             status="active", confidence=0.9, n_observations=5,
                             rule_version=rule_version, last_supporting_event_id=1,
                             last_updated_ns=1))
    index = GroundingIndex("e" * 64, facts)
    assert index.size + len(index.left_out) == len(facts)
    for request in (GroundingRequest("manipulation.grasp", "glass_cup", "sim"),
                    GroundingRequest("manipulation.grasp", "glass_cup", "sim",
                                     allow_analogies=True, zone="dock")):
        index.lookup(request)
    index.known_properties()
    changed = GroundingIndex("e" * 64, []).with_changes(facts).with_changes(facts[::-1])
    assert changed.size == index.size and set(changed.left_out) == set(index.left_out)
    PriorIndex([PriorFact("a" * 64, "arm", "fuzz", f) for f in facts])
    for fact in facts:
        try:  # what the published snapshot does per fact (ros/fact_snapshot.py)
            if stored_fact_problem(fact.kind, fact.rule_version, fact.peek_value) is None:
                fact_element(fact, *served_fields(fact.peek_value()))
        except Exception:
            pass
        if fact.rule_version == "operator/1" and (fact.kind, fact.key) in index.facts:
            assert value_problem(fact.kind, fact.peek_value()) is None


@SETTINGS
@given(kinds_and_values)
def test_a_value_of_its_kinds_shape_is_read_by_every_consumer(kind_value):
    kind, value = kind_value
    if value_problem(kind, value) is not None:
        return
    fact = FactRow(id=1, kind=kind, key="k", value_json=json.dumps(value), status="active",
                   confidence=0.9, n_observations=5, rule_version="operator/1",
                   last_supporting_event_id=1, last_updated_ns=1)
    read_by_every_consumer(fact, "d" * 64)

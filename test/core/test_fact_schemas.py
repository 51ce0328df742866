"""Each fact kind's value has one shape (consolidation/fact_schemas.py): what the rules
render has it; an operator fact without it is refused with the field named; one already
in the log (an older version's, or written by hand) is skipped by every pass and by
replay, named, and can be retracted by a well-shaped operator fact for its key."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import result_event, varied_events

from robot_memory.canonical import canonical_json
from robot_memory.consolidation import consolidation_pass, facts_snapshot, replay_snapshot
from robot_memory.consolidation import overrides as ov
from robot_memory.consolidation.checkpoint import ill_shaped_overrides
from robot_memory.consolidation import RulesConfig
from robot_memory.consolidation.fact_schemas import REQUIRED, SCHEMAS, schema_of, value_problem
from robot_memory.consolidation.rules import DEFAULT_RULE_VERSION, RULE_VERSIONS
from robot_memory.event_kinds import OVERRIDE
from robot_memory.evidence.bundle import export_bundle, import_bundle
from robot_memory.grounding.served import served_fields
from robot_memory.wire.semantic_fact import fact_element
from robot_memory.grounding.index import OK, GroundingIndex, GroundingRequest
from robot_memory.manifest import load_manifest
from robot_memory.store import MemoryStore

IDENT = "f" * 64
KEY = "manipulation.grasp + glass_cup + sim_relaxed"
WHO = {"operator": "alice", "reason": "bench test"}
# What a value may carry besides what the rules render: an operator fact's marks.
OPERATOR_MARKS = {"source", "operator", "reason"}
# The reported override: a median given as a bare number.
REPORTED = {"recommended_parameters": {"force_n": 25}}
WELL_SHAPED = {"skill_id": "manipulation.grasp", "target_class": "glass_cup",
               "environment": "sim_relaxed", "recommended_parameters": {"force_n": {"median": 25}}}


@pytest.fixture
def part(db_url):
    return MemoryStore(db_url).partition(IDENT)


def logged_operator_fact(part, kind, key, value, stamp_ns=10**12, confidence=1.0):
    """An operator fact appended as an older version (or a hand) could: unchecked."""
    return part.append(OVERRIDE, {"action": "operator_fact", **WHO, "fact_kind": kind,
                                  "fact_key": key, "value": value,
                                  "confidence": confidence}, stamp_ns)


@pytest.mark.parametrize("version", RULE_VERSIONS)
def test_what_real_passes_render_has_its_kinds_shape_and_nothing_is_undeclared(part, version):
    config = RulesConfig(rule_version=version)
    part.append_many(varied_events(600))
    part.append_many([result_event(400 + i, success=i % 3 != 0, reason="collision",
                                   zone="" if i % 2 else "dock") for i in range(40)])
    consolidation_pass(part, config)
    part.append_many([result_event(9 * 86400 + i, success=False) for i in range(30)])
    consolidation_pass(part, config)  # a second pass: merged states render the same shape
    facts = part.facts()
    assert {f.kind for f in facts} == set(SCHEMAS)
    for fact in facts:
        assert value_problem(fact.kind, fact.value) is None, (fact.kind, fact.key)
        # Every field the schema declares is rendered (zone_risk: the one its scope names).
        assert fact.rule_version == fact.value["rule_version"] == version
        declared = set(schema_of(fact.kind, fact.value).model_fields) - OPERATOR_MARKS
        if fact.kind == "zone_risk":
            declared -= {"zone", "environment"} - {fact.value["scope"]}
        assert set(fact.value) == declared, (fact.kind, sorted(declared ^ set(fact.value)))


def test_the_required_fields_are_the_documented_ones():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "consolidation.md").read_text(
        encoding="utf-8")
    section = doc[doc.index("## The shape of a fact's value"):]
    for kind, fields in REQUIRED.items():
        row = next(line for line in section.splitlines() if line.startswith(f"| `{kind}` |"))
        required = row.split("|")[2]
        assert sorted(re.findall(r"`([a-z_]+)`", required)) == sorted(fields), kind


@pytest.mark.parametrize("value, field", [
    (REPORTED, "value.skill_id"),
    ({**WELL_SHAPED, **REPORTED}, "value.recommended_parameters.force_n"),
    ({**WELL_SHAPED, "rate": "0.9"}, "value.rate"),
    ({**WELL_SHAPED, "rate": 1.5}, "value.rate"),
    ({**WELL_SHAPED, "recomended_parameters": {}}, "value.recomended_parameters"),
    ([1, 2], "value"),
])
def test_an_ill_shaped_operator_fact_is_refused_naming_the_field(part, value, field):
    with pytest.raises(ov.OverrideError) as refused:
        ov.record_override(part, "operator_fact", stamp_ns=1, kind="skill_success_rate",
                           key=KEY, value_json=json.dumps(value), **WHO)
    assert str(refused.value).startswith(f"{field}: ")
    assert part.head()[0] == 0  # nothing logged


def test_a_well_shaped_operator_fact_is_served(part):
    ov.record_override(part, "operator_fact", stamp_ns=1, kind="skill_success_rate", key=KEY,
                       value_json=json.dumps(WELL_SHAPED), **WHO)
    consolidation_pass(part)
    (fact,) = part.facts()
    assert served_fields(fact.value) == (None, [("force_n", 25.0)])
    assert fact_element(fact, *served_fields(fact.peek_value()))
    answer = GroundingIndex(IDENT, part.facts()).lookup(
        GroundingRequest("manipulation.grasp", "glass_cup", "sim_relaxed"))
    assert answer.status == OK and answer.facts == (fact,)


def test_one_already_in_the_log_is_skipped_named_and_retracted_by_a_new_one(part):
    part.append_many([result_event(i) for i in range(8)])
    consolidation_pass(part)
    bad = logged_operator_fact(part, "skill_success_rate", KEY, REPORTED)
    report = consolidation_pass(part)  # neither fatal nor applied
    (skipped,) = report.ill_shaped
    assert (skipped.event_id, skipped.kind, skipped.key, skipped.problem.field) == \
        (bad.id, "skill_success_rate", KEY, "value.skill_id")
    assert f"override event {bad.id}" in skipped.describe()
    assert ill_shaped_overrides(part) == [skipped]  # what a node names at boot
    rate = {(f.kind, f.key): f for f in part.facts()}[("skill_success_rate", KEY)]
    assert rate.rule_version == DEFAULT_RULE_VERSION  # the robot's own fact stands
    assert replay_snapshot(part) == facts_snapshot(part)
    again = consolidation_pass(part)  # every pass skips it, and says so
    assert again.ill_shaped == [skipped] and not again.applied
    # Retracted: a well-shaped operator fact for the key (the bad one never became a row).
    ov.record_override(part, "operator_fact", stamp_ns=2 * 10**12, kind="skill_success_rate",
                       key=KEY, value_json=json.dumps(WELL_SHAPED), **WHO)
    retracted = consolidation_pass(part)
    assert retracted.ill_shaped == [] and ill_shaped_overrides(part) == []  # no more WARN
    rate = {(f.kind, f.key): f for f in part.facts()}[("skill_success_rate", KEY)]
    assert rate.rule_version == "operator/1"
    assert rate.value["recommended_parameters"] == {"force_n": {"median": 25}}
    assert replay_snapshot(part) == facts_snapshot(part)


def test_a_later_ill_shaped_one_leaves_the_earlier_operator_fact_in_force(part):
    ov.record_override(part, "operator_fact", stamp_ns=1, kind="skill_success_rate", key=KEY,
                       value_json=json.dumps(WELL_SHAPED), **WHO)
    logged_operator_fact(part, "skill_success_rate", KEY, {**WELL_SHAPED, **REPORTED}, 2)
    logged_operator_fact(part, "zone_risk", "zone + dock", {"scope": "zone"}, 3)
    logged_operator_fact(part, "object_property", "cup + mass_kg", None, 4, confidence="high")
    report = consolidation_pass(part)
    assert [s.problem.field for s in report.ill_shaped] == [
        "value.recommended_parameters.force_n", "value.zone", "confidence"]
    (fact,) = part.facts()
    assert fact.value["recommended_parameters"] == {"force_n": {"median": 25}}
    assert replay_snapshot(part) == facts_snapshot(part)


def test_an_ill_shaped_stored_operator_fact_is_left_out_of_the_index_alone(part):
    """A row an older version wrote for an ill-shaped operator fact: the index leaves it
    out, names it, and serves the rest."""
    part.append_many([result_event(i) for i in range(8)])
    consolidation_pass(part)
    good = part.facts()
    (rate,) = [f for f in good if f.kind == "skill_success_rate"]
    bad = type(rate)(id=999, kind="skill_success_rate", key="x + y + z",
                     value_json=json.dumps(REPORTED), status="active", confidence=1.0,
                     n_observations=0, rule_version="operator/1",
                     last_supporting_event_id=1, last_updated_ns=1)
    index = GroundingIndex(IDENT, [*good, bad])
    assert set(index.left_out) == {("skill_success_rate", "x + y + z")}
    assert "value.skill_id" in index.left_out[("skill_success_rate", "x + y + z")]
    assert index.size == len(good)
    assert index.lookup(GroundingRequest("manipulation.grasp", "glass_cup",
                                         "sim_relaxed")).status == OK
    changed = index.with_changes([bad])
    assert changed.size == len(good) and set(changed.left_out) == set(index.left_out)


def test_a_bundle_with_one_in_its_log_imports_with_the_same_skip(part, tmp_path):
    """Bundle import re-runs the passes: the ill-shaped operator fact is skipped again,
    so the chain and the facts come out the same."""
    part.append_many([result_event(i) for i in range(8)])
    logged_operator_fact(part, "zone_risk", "zone + dock", {"scope": "zone"})
    consolidation_pass(part)
    export_bundle(part, tmp_path / "bundle")
    imported, passes = import_bundle(tmp_path / "bundle",
                                     MemoryStore(f"sqlite:///{tmp_path / 'copy.db'}"))
    assert passes == 1 and imported.head() == part.head()
    assert facts_snapshot(imported) == facts_snapshot(part)
    assert [s.problem.field for s in ill_shaped_overrides(imported)] == ["value.zone"]


def test_consolidate_and_replay_name_the_skip(db_url, manifest_file):
    part = MemoryStore(db_url).partition(load_manifest(manifest_file).identity_hash())
    bad = logged_operator_fact(part, "object_property", "cup + mass_kg", {"band": 1})
    store = ["--db", db_url, "--manifest", str(manifest_file)]
    for verb in (["consolidate", "--apply"], ["replay", "--until-event", str(bad.id)]):
        done = subprocess.run([sys.executable, "-m", "robot_memory.cli", *verb, *store],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        named = done.stdout + done.stderr
        assert f"override event {bad.id}" in named and "value.target_class" in named, named


def test_a_stored_row_that_is_not_json_costs_its_own_fact_only(part):
    """A hand-edited row: the pass and its diff go on; the index leaves the row out."""
    from robot_memory.consolidation.diff import format_diff
    from sqlalchemy import text
    part.append_many([result_event(i) for i in range(8)])
    consolidation_pass(part)
    with part.store.write() as conn:
        conn.execute(text("UPDATE semantic_facts SET fact_value_json = '{not json' "
                          "WHERE fact_kind = 'skill_success_rate'"))
    part.append_many([result_event(100 + i) for i in range(4)])
    report = consolidation_pass(part, apply=False)
    assert f"~ skill_success_rate [{KEY}]: confidence None -> " in format_diff(report)
    index = GroundingIndex(IDENT, part.facts())
    assert list(index.left_out) == [("skill_success_rate", KEY)] and index.size >= 1
    assert consolidation_pass(part).applied
    assert GroundingIndex(IDENT, part.facts()).left_out == {}  # the pass rewrote it


def test_a_value_is_named_alike_as_given_and_as_the_log_gives_it_back():
    """Two ill-shaped keys of one mapping: the field named does not follow their order
    (canonical JSON, in the log, sorts them)."""
    value = {"skill_id": "manipulation.grasp", "target_class": "glass_cup",
             "environment": "sim", "rate": 0.75, "n": 4, "successes": 3,
             "recommended_parameters": {"band": None, "": None}}
    from_log = json.loads(canonical_json(value))
    assert value_problem("skill_success_rate", value) == \
        value_problem("skill_success_rate", from_log) is not None

"""robot_memory.execution_result: one place for a result's fields, limits and checks.

The model, the fast path, the size check and the stored-result check read the same
limits; the store reads stored results through the kernel, not through the intake.
"""

import ast
from pathlib import Path

import pytest

from robot_memory.execution_result import (ATTEMPT_FIELDS, FIELDS, MAX_TEXT, TEXT_FIELDS,
                                           TEXT_LIMITS, ExecutionRecord, InvalidRecord,
                                           check_sizes, plainly_valid, record_from_payload,
                                           stored_fields, validated)
from robot_memory.store.facets import facets_of_payload

PACKAGE = Path(__file__).resolve().parents[2] / "robot_memory"
GOOD = {"stamp_ns": 7, "skill_id": "manipulation.grasp", "target_class": "glass_cup",
        "environment": "lab", "zone": "", "parameters": {"force_n": 25.0},
        "observations": {}, "success": True, "failure_reason": "", "duration_s": 1.5,
        "intent_id": "", "notes": ""}


def test_the_models_text_limits_are_the_tables():
    declared = {}
    for name, info in ExecutionRecord.model_fields.items():
        for constraint in info.metadata:
            if getattr(constraint, "max_length", None) is not None:
                declared[name] = constraint.max_length
    assert declared == TEXT_LIMITS
    assert set(TEXT_FIELDS) | {"skill_id"} | set(ATTEMPT_FIELDS) == set(TEXT_LIMITS)
    assert set(TEXT_LIMITS) < set(FIELDS)


@pytest.mark.parametrize("name", sorted(TEXT_LIMITS))
def test_every_text_is_refused_one_past_its_limit_and_kept_at_it(name):
    at_limit = {**GOOD, name: "a" * TEXT_LIMITS[name]}
    check_sizes(at_limit)
    # failure_reason: success and a reason; a named attempt is checked in full
    assert plainly_valid(at_limit) == (name not in ("failure_reason", *ATTEMPT_FIELDS))
    with pytest.raises(InvalidRecord) as info:
        check_sizes({**GOOD, name: "a" * (TEXT_LIMITS[name] + 1)})
    assert (info.value.field, info.value.reason) == (name, "oversized")
    assert not plainly_valid({**GOOD, name: "a" * (TEXT_LIMITS[name] + 1)})


@pytest.mark.parametrize("change, field, reason", [
    ({"skill_id": ""}, "skill_id", "empty_skill_id"),
    ({"success": None}, "success", "missing_field"),
    ({"zone": 3}, "text field", "wrong_type"),
    ({"notes": None}, "text field", "wrong_type"),
    ({"parameters": {"f": float("nan")}}, "parameters", "wrong_type"),
    ({"observations": []}, "observations", "wrong_type"),
])
def test_a_stored_result_the_rules_cannot_read_is_refused_alike_everywhere(change, field,
                                                                           reason):
    payload = {**GOOD, **change}
    with pytest.raises(InvalidRecord) as info:
        stored_fields(payload)
    assert (info.value.field, info.value.reason) == (field, reason)
    with pytest.raises(InvalidRecord):
        record_from_payload(payload, 7)
    combo, values = facets_of_payload(payload, 7)
    assert combo[7] == reason and values == []


def test_a_stored_result_reads_back_as_stored():
    payload = {k: v for k, v in GOOD.items() if k != "stamp_ns"}
    record = record_from_payload(payload, 7)
    assert (record.stamp_ns, record.skill_id, record.parameters, record.duration_s) == (
        7, "manipulation.grasp", {"force_n": 25.0}, 1.5)
    legacy = record_from_payload({"skill_id": "s", "success": False}, 1)
    assert (legacy.target_class, legacy.notes, legacy.parameters, legacy.duration_s) == (
        "", "", {}, 0.0)
    assert MAX_TEXT == TEXT_LIMITS["zone"]


def test_the_store_does_not_import_the_intake():
    offenders = []
    for path in sorted((PACKAGE / "store").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {name}" for name in names
                          if name.startswith("robot_memory.intake")]
    assert offenders == []


@pytest.mark.parametrize("fields, field, words", [
    ({"attempt_id": "grasp 7"}, "attempt_id", "only letters"),
    ({"attempt_id": "event:12"}, "attempt_id", "may not start"),
    ({"amends": "event:"}, "amends", "event id"),
    ({"amends": "event:0"}, "amends", "event id"),
    ({"amends": "event:x1"}, "amends", "event id"),
    ({"attempt_id": "grasp-7", "amends": "grasp-7"}, "amends", "own attempt_id"),
])
def test_an_attempt_name_that_cannot_be_kept_is_refused_by_field(fields, field, words):
    with pytest.raises(InvalidRecord) as info:
        validated({**GOOD, **fields})
    assert info.value.field == field and words in str(info.value)


def test_a_payload_keeps_the_attempt_names_only_when_given():
    plain = validated(GOOD).payload()
    assert not set(ATTEMPT_FIELDS) & set(plain)  # stored as before they existed
    named = validated({**GOOD, "attempt_id": "grasp-7", "amends": "event:12"}).payload()
    assert (named["attempt_id"], named["amends"]) == ("grasp-7", "event:12")
    assert plainly_valid({**GOOD, "attempt_id": "", "amends": ""})
    assert not plainly_valid({**GOOD, "attempt_id": "grasp-7", "amends": ""})

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_memory.intake.records import (MAX_NOTES, MAX_TEXT, MAX_VALUES, InvalidRecord,
                                         pairs_to_dict, validate_record, validate_record_fully,
                                         validated_payload)

GOOD = {"stamp_ns": 5, "skill_id": "manipulation.grasp", "target_class": "glass_cup",
        "parameters": {"force_n": 25.0}, "success": True}


def test_good_record_round_trips_to_payload():
    record = validate_record(GOOD)
    assert record.payload()["parameters"] == {"force_n": 25.0}
    assert "stamp_ns" not in record.payload()


@pytest.mark.parametrize("change, field, reason", [
    ({"skill_id": ""}, "skill_id", "empty_skill_id"),
    ({"parameters": {"force_n": math.nan}}, "parameters.force_n", "non_finite_value"),
    ({"observations": {"mass_kg": math.inf}}, "observations.mass_kg", "non_finite_value"),
    ({"success": "yes"}, "success", "wrong_type"),
    ({"duration_s": -1.0}, "duration_s", "invalid_value"),
    ({"colour": "red"}, "colour", "unknown_field"),
    ({"notes": "x" * 5000}, "notes", "oversized"),
])
def test_bad_records_name_the_field_and_reason(change, field, reason):
    with pytest.raises(InvalidRecord) as info:
        validate_record({**GOOD, **change})
    assert info.value.field == field
    assert info.value.reason == reason


def test_missing_success_is_reported():
    data = dict(GOOD)
    del data["success"]
    with pytest.raises(InvalidRecord) as info:
        validate_record(data)
    assert info.value.reason == "missing_field"


def test_duplicate_keys_are_refused():
    with pytest.raises(InvalidRecord, match="twice"):
        pairs_to_dict("parameters", [("force_n", 1.0), ("force_n", 2.0)])


# -- the fast path of validate_record against pydantic's validation ---------------------

# Values at and around every bound and type the fast path checks.
_texts = st.one_of(st.text(max_size=4), st.text(min_size=MAX_TEXT - 1, max_size=MAX_TEXT + 1),
                   st.sampled_from(["", "manipulation.grasp", "a b", "_x", "-x", "x/y.z-1",
                                    "mail jane.doe@example.org", "sk-" + "a" * 30]))
_numbers = st.one_of(st.floats(), st.integers(-3, 3), st.booleans(), st.sampled_from([0.0, -0.0]))
_names = st.one_of(st.sampled_from(["force_n", "mass_kg", "a.b/c-d", "bad key", "", "-x",
                                    "admin@robot.example"]), st.text(max_size=3))
_mappings = st.one_of(st.dictionaries(_names, _numbers, max_size=4),
                      st.dictionaries(st.sampled_from([f"k{i}" for i in range(MAX_VALUES + 2)]),
                                      st.just(1.0), min_size=MAX_VALUES - 1,
                                      max_size=MAX_VALUES + 1),
                      st.just([("force_n", 1.0)]))
_FIELDS = {
    "stamp_ns": st.one_of(st.integers(-2, 2**63), st.just(1.5), st.just(True)),
    "skill_id": _texts, "target_class": _texts, "environment": _texts, "zone": _texts,
    "parameters": _mappings, "observations": _mappings,
    "success": st.one_of(st.booleans(), st.just(1), st.just("true")),
    "failure_reason": _texts, "duration_s": _numbers, "intent_id": _texts,
    "attempt_id": st.sampled_from(["", "grasp-7", "event:3", "a b", "x" * 129]),
    "amends": st.sampled_from(["", "grasp-7", "event:3", "event:0", "event:", "a b"]),
    "notes": st.one_of(_texts, st.text(min_size=MAX_NOTES - 1, max_size=MAX_NOTES + 1,
                                       alphabet="ab ")),
}
_PLAIN = {"stamp_ns": 7, "skill_id": "manipulation.grasp", "target_class": "glass_cup",
          "environment": "lab", "zone": "", "parameters": {"force_n": 25.0},
          "observations": {}, "success": True, "failure_reason": "", "duration_s": 1.5,
          "intent_id": "", "notes": "", "attempt_id": "", "amends": ""}


def _outcome(validate, data):
    try:
        record = validate(data)
    except InvalidRecord as exc:
        return ("refused", exc.field, exc.reason, exc.detail)
    return ("accepted", record, record.model_dump(), record.payload(), record.model_fields_set)


@settings(max_examples=1500, deadline=None)
@given(changes=st.fixed_dictionaries({}, optional=_FIELDS),
       dropped=st.sets(st.sampled_from(sorted(_PLAIN))),
       extra=st.booleans())
def test_validation_accepts_refuses_and_words_errors_exactly_as_pydantic(changes, dropped,
                                                                         extra):
    """Every input, plainly valid or not, gets the same record or the same refusal
    (field, reason and wording) as the pydantic validation alone gives."""
    data = {k: v for k, v in {**_PLAIN, **changes}.items() if k not in dropped}
    if extra:
        data["colour"] = "red"
    assert _outcome(validate_record, data) == _outcome(validate_record_fully, data)


@settings(max_examples=1500, deadline=None)
@given(changes=st.fixed_dictionaries({}, optional=_FIELDS),
       dropped=st.sets(st.sampled_from(sorted(_PLAIN))),
       extra=st.booleans())
def test_validated_payload_is_the_records_stamp_and_payload(changes, dropped, extra):
    """validated_payload (the logger's intake) accepts and refuses exactly as
    validate_record does, and gives that record's stamp and payload, to the type."""
    data = {k: v for k, v in {**_PLAIN, **changes}.items() if k not in dropped}
    if extra:
        data["colour"] = "red"
    expected = _outcome(validate_record, dict(data))
    try:
        stamp_ns, payload = validated_payload(data)
    except InvalidRecord as exc:
        assert expected == ("refused", exc.field, exc.reason, exc.detail)
        return
    assert expected[0] == "accepted"
    record = expected[1]
    assert (stamp_ns, payload) == (record.stamp_ns, record.payload())
    assert [(type(k), type(v)) for k, v in sorted(payload.items())] == [
        (type(k), type(v)) for k, v in sorted(record.payload().items())]


def test_a_record_validated_on_the_fast_path_keeps_no_reference_to_the_input():
    data = {**_PLAIN, "parameters": {"force_n": 25.0}}
    record = validate_record(data)
    data["parameters"]["force_n"] = 99.0
    assert record.parameters == {"force_n": 25.0}
    payload = record.payload()
    payload["parameters"]["force_n"] = 1.0
    assert record.parameters == {"force_n": 25.0}
    with pytest.raises(Exception):
        record.skill_id = "other"  # still frozen


def test_a_success_with_a_failure_reason_is_refused_as_contradictory():
    from types import SimpleNamespace

    from robot_memory.intake.admission import Admission
    from robot_memory.intake.records import message_fields
    contradictory = {**_PLAIN, "failure_reason": "slipped"}
    for validate in (validate_record, validate_record_fully, validated_payload):
        with pytest.raises(InvalidRecord) as info:
            validate(dict(contradictory))
        assert (info.value.field, info.value.reason) == ("failure_reason",
                                                         "contradictory_result")
    # a message (the logger, a bag) takes the same path
    msg = SimpleNamespace(header=SimpleNamespace(stamp=SimpleNamespace(sec=1, nanosec=0)),
                          parameters=[], observations=[], **{
                              k: v for k, v in contradictory.items()
                              if k not in ("stamp_ns", "parameters", "observations")})
    refused = Admission().admit(message_fields, msg, "t", 0)
    assert refused.reason == "contradictory_result" and "success is true" in refused.detail
    # either half alone is fine
    assert validate_record({**_PLAIN, "success": False, "failure_reason": "slipped"})
    assert validate_record(dict(_PLAIN)).failure_reason == ""

import math

import pytest

from robot_memory.records import InvalidRecord, pairs_to_dict, validate_record

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

"""The privacy boundary refuses secrets and personal data, and never repeats them."""

import pytest

from robot_memory.intake.privacy import find_sensitive
from robot_memory.intake.records import InvalidRecord, validate_record

BASE = {"stamp_ns": 1, "skill_id": "manipulation.grasp", "target_class": "glass_cup",
        "success": True}

SECRETS = [
    ("notes", "key -----BEGIN RSA PRIVATE KEY----- MIIEow", "private_key"),
    ("notes", "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
     "jwt"),
    ("notes", "creds AKIAIOSFODNN7EXAMPLE", "api_key"),
    ("intent_id", "sk-abcdefghijklmnopqrstuvwx1234", "api_key"),
    ("notes", "api_key=8f3b2c1d9e7a6b5c4d3e", "api_key"),
    ("notes", "operator password: hunter2!", "password"),
    ("notes", "call nurse.jones@hospital.example if it drops", "email"),
    ("failure_reason", "paged +44 20 7946 0958", "phone_number"),
    ("notes", "call (555) 123-4567 now", "phone_number"),
    ("notes", "ring +14155550123", "phone_number"),
]


@pytest.mark.parametrize("field, text, category", SECRETS)
def test_secrets_are_refused_naming_field_and_category_not_value(field, text, category):
    with pytest.raises(InvalidRecord) as info:
        validate_record({**BASE, field: text})
    assert info.value.reason == f"privacy_{category}" and info.value.field == field
    assert text not in str(info.value) and text.split()[-1] not in str(info.value)


@pytest.mark.parametrize("text", [
    "slipped at 25 N after 3 tries", "retry 2 of 5, force 12.5", "zone shelf_b, row 14",
    "run 20261122-1130", "grip width 0.085 m", "cup id 4521 on tray 7", "v1.2.3",
])
def test_ordinary_operational_text_passes(text):
    assert find_sensitive({**BASE, "notes": text}) is None


def test_parameter_names_are_screened_too():
    assert find_sensitive({"parameters": {"admin@robot.example": 1.0}}).field == \
        "parameters key"

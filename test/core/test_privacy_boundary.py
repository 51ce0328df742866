"""The privacy boundary covers every text that enters the log, not only execution
results: each text field of a human override (and its value, at any depth) is refused
with the privacy reason and a privacy_rejection event, through the recording the
`override` service uses and through the command line; a grounding consultation's
requester and intent id are kept in the log as their category only. On real SQLite
files; the secret itself is nowhere in them."""

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from robot_memory.grounding.audit import AuditWriter
from robot_memory.consolidation import overrides as ov
from robot_memory.event_kinds import FACT_CONSULTATION, OVERRIDE, PRIVACY_REJECTION
from robot_memory.store import MemoryStore, NewEvent

IDENT = "c" * 64
SECRET = "jane.doe@example.org"
KEY = "glass_cup + mass_kg"
VALUE = '{"band": {"median": 0.3}, "property": "mass_kg", "target_class": "glass_cup"}'
FACT = dict(action="operator_fact", operator="alice", reason="bench test", kind="object_property",
            key=KEY, value_json=VALUE)


@pytest.fixture
def part(tmp_path):
    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.db'}")
    yield store.partition(IDENT)
    store.close()


def rejections(part) -> list[dict]:
    return [e.payload for e in part.events([PRIVACY_REJECTION])]


def store_bytes(part) -> bytes:
    path = Path(part.store.url.removeprefix("sqlite:///"))
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


@pytest.mark.parametrize("field, changes", [
    ("operator", {"operator": SECRET}),
    ("reason", {"reason": f"asked by {SECRET}"}),
    ("kind", {"kind": SECRET}),
    ("key", {"key": f"manipulation.grasp + {SECRET}"}),
    ("value", {"value_json": '{"mass_kg": 0.3, "notes": ["weighed by %s"]}' % SECRET}),
    ("value", {"value_json": '{"by": {"who": "password: hunter22"}}'}),
    ("value key", {"value_json": '{"%s": 1}' % SECRET}),
    ("archive_path", {"action": "reset_semantic", "archive_path": f"/tmp/{SECRET}.json"}),
])
def test_each_text_of_an_override_is_refused_at_the_privacy_boundary(part, field, changes):
    request = {**FACT, **changes}
    action = request.pop("action")
    with pytest.raises(ov.OverridePrivacyRefused) as refused:
        ov.record_override(part, action, request.pop("operator"), request.pop("reason"), 7,
                           **request)
    category = refused.value.finding.category
    assert str(refused.value) == (f"{field}: looks like {category.replace('_', ' ')}; refused "
                                  f"at the privacy boundary (privacy_{category})")
    assert part.count_events(OVERRIDE) == 0
    assert rejections(part) == [{"source": "override", "field": field, "category": category}]
    assert SECRET.encode() not in store_bytes(part) and b"hunter22" not in store_bytes(part)
    assert not Path(f"/tmp/{SECRET}.json").exists()  # refused before the archive is written


def test_a_clean_override_is_recorded_as_before(part):
    event = ov.record_override(part, "operator_fact", "alice", "bench test", 7,
                               **{k: v for k, v in FACT.items()
                                  if k not in ("action", "operator", "reason")})
    assert event.payload["value"] == json.loads(VALUE) and rejections(part) == []


def test_the_command_line_refuses_the_same_texts(part, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "robot_memory.cli", "override", "freeze", "--db",
         part.store.url, "--identity", IDENT, "--operator", "alice", "--reason",
         "call +44 20 7946 0958"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert "reason: looks like phone number; refused at the privacy boundary" in done.stderr
    assert "7946" not in done.stderr
    assert part.count_events(OVERRIDE) == 0
    assert rejections(part) == [{"source": "override", "field": "reason",
                                 "category": "phone_number"}]


def consultation(i: int, requester: str, intent_id: str) -> NewEvent:
    return NewEvent(FACT_CONSULTATION, {"consultation_id": str(i), "requester": requester,
                                        "intent_id": intent_id, "status": 0}, i)


def test_a_consultation_keeps_a_sensitive_requester_or_intent_as_its_category_only(part):
    writer = AuditWriter(part, flush_period_s=60.0)
    writer.submit(consultation(1, "planner", "7c0e2b1a-9d7e-4c1e-8f00-1b2c3d4e5f60"))
    writer.submit(consultation(2, SECRET, "intent-2"))
    writer.submit(consultation(3, "planner", "AKIAIOSFODNN7EXAMPLE"))
    writer.submit(consultation(4, SECRET, "password: hunter22"))
    writer.close()
    kept = [(e.payload["requester"], e.payload["intent_id"])
            for e in part.events([FACT_CONSULTATION])]
    assert kept == [("planner", "7c0e2b1a-9d7e-4c1e-8f00-1b2c3d4e5f60"),
                    ("[refused: privacy_email]", "intent-2"),
                    ("planner", "[refused: privacy_api_key]"),
                    ("[refused: privacy_email]", "[refused: privacy_password]")]
    assert rejections(part) == [
        {"source": "ground", "field": "requester", "category": "email"},
        {"source": "ground", "field": "intent_id", "category": "api_key"},
        {"source": "ground", "field": "requester", "category": "email"},
        {"source": "ground", "field": "intent_id", "category": "password"}]
    assert writer.redacted == Counter(email=2, api_key=1, password=1)
    raw = store_bytes(part)
    assert SECRET.encode() not in raw and b"AKIAIOSFODNN7EXAMPLE" not in raw \
        and b"hunter22" not in raw

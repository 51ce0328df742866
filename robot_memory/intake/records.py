"""Validated execution results: the one shape every producer's input is checked into.

The ROS message, a JSON line from `robot-memory ingest` and a bag record all become an
`ExecutionRecord` before anything is stored; whatever fails becomes an
`InvalidRecord` that says which field is wrong and why.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from robot_memory.errors import InputError
from robot_memory.intake.privacy import find_sensitive
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$")
MAX_TEXT = 256
MAX_NOTES = 2048
MAX_VALUES = 64
MAX_KEY = MAX_TEXT  # a parameter's or observation's name (_plain_name relies on it)
MAX_STAMP_NS = 2**63 - 1  # what the store's 64-bit time columns hold
# The refusal of a result that says both: success true and a failure_reason.
CONTRADICTORY = "contradictory_result"


class InvalidRecord(InputError):
    """Raised when an execution result is malformed; `field` names the culprit and
    `reason` is a short stable code used for counting (e.g. empty_skill_id)."""

    def __init__(self, field: str, reason: str, detail: str):
        super().__init__(f"{field}: {detail}")
        self.field = field
        self.reason = reason
        self.detail = detail


def _check_values(kind: str, values: dict[str, float]) -> dict[str, float]:
    if len(values) > MAX_VALUES:
        raise ValueError(f"more than {MAX_VALUES} {kind}")
    for key, value in values.items():
        if len(key) > MAX_KEY:
            raise ValueError(f"more than {MAX_KEY} characters in a {kind} name")
        if not _NAME.match(key):
            raise ValueError(f"{kind} key {key!r} is not a plain name")
        if not math.isfinite(value):
            raise ValueError(f"{kind} {key!r} is not finite ({value})")
    return values


class ExecutionRecord(BaseModel):
    """One skill attempt. `stamp_ns` is the attempt's end in ROS time (sim time in Gazebo)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    stamp_ns: int = Field(ge=0, le=MAX_STAMP_NS)
    skill_id: str = Field(min_length=1, max_length=MAX_TEXT)
    target_class: str = Field(default="", max_length=MAX_TEXT)
    environment: str = Field(default="", max_length=MAX_TEXT)
    zone: str = Field(default="", max_length=MAX_TEXT)
    parameters: dict[str, float] = Field(default_factory=dict)
    observations: dict[str, float] = Field(default_factory=dict)
    success: bool
    failure_reason: str = Field(default="", max_length=MAX_TEXT)
    duration_s: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    intent_id: str = Field(default="", max_length=MAX_TEXT)
    notes: str = Field(default="", max_length=MAX_NOTES)

    @field_validator("skill_id")
    @classmethod
    def _skill_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"skill_id {value!r} is not a dotted name")
        return value

    @field_validator("parameters")
    @classmethod
    def _parameters(cls, value: dict[str, float]) -> dict[str, float]:
        return _check_values("parameter", value)

    @field_validator("observations")
    @classmethod
    def _observations(cls, value: dict[str, float]) -> dict[str, float]:
        return _check_values("observation", value)

    def payload(self) -> dict[str, Any]:
        """What the store keeps (the stamp has its own column): model_dump without the
        stamp, built directly (it runs for every stored result)."""
        payload = dict(self.__dict__)
        del payload["stamp_ns"]
        payload["parameters"] = dict(payload["parameters"])
        payload["observations"] = dict(payload["observations"])
        return payload


def _reason_code(field: str, err_type: str, message: str) -> str:
    if field == "skill_id" and err_type == "string_too_short":
        return "empty_skill_id"
    if "not finite" in message or err_type == "finite_number":
        return "non_finite_value"
    if err_type == "missing":
        return "missing_field"
    if err_type == "extra_forbidden":
        return "unknown_field"
    if err_type.endswith("_type") or err_type.endswith("_parsing"):
        return "wrong_type"
    if err_type == "string_too_long" or "more than" in message:
        return "oversized"
    return "invalid_value"


def _check_finite(data: dict[str, Any]) -> None:
    """Name the exact entry (parameters.force_n) when a value is NaN or infinite, and a
    stamp that is (not a wrong type: JSON lines give NaN stamps, and say non_finite_value)."""
    stamp = data.get("stamp_ns")
    if isinstance(stamp, float) and not math.isfinite(stamp):
        raise InvalidRecord("stamp_ns", "non_finite_value", f"{stamp} is not a finite number")
    for kind in ("parameters", "observations"):
        values = data.get(kind)
        if isinstance(values, dict):
            for key, value in values.items():
                if isinstance(value, float) and not math.isfinite(value):
                    raise InvalidRecord(f"{kind}.{key}", "non_finite_value",
                                        f"{value} is not a finite number")


def validate_record(data: dict[str, Any]) -> ExecutionRecord:
    """Build a record from plain data, or raise InvalidRecord for the first bad field.
    Secrets and personal data are refused here too (reason privacy_<category>); the
    detail names the field and the category, never the value."""
    if _plainly_valid_and_public(data):
        return _record_of_checked(data)
    return validate_record_fully(data)


def _plainly_valid_and_public(data: dict[str, Any]) -> bool:
    """True for what every well-behaved producer sends, checked cheaply (_plainly_valid),
    when nothing in it looks sensitive; raises the privacy refusal when something does;
    False for anything else, which pydantic then validates."""
    if not _plainly_valid(data):
        return False
    finding = find_sensitive(data)
    if finding is not None:
        raise privacy_refusal(finding)
    return True


def validated_payload(data: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(stamp_ns, payload()) of `validate_record(data)`, refused alike, without building
    the record, for a caller that gives `data` away (the logger's intake, whose data
    was just read from a message): on the fast path data itself, its stamp taken out,
    becomes the payload. A result the log keeps needs no record object, and making one
    and its payload cost about a sixth of the intake's work per result."""
    if _plainly_valid(data):  # _plainly_valid_and_public, inline: once per result
        finding = find_sensitive(data)
        if finding is not None:
            raise privacy_refusal(finding)
        return data.pop("stamp_ns"), data
    record = validate_record_fully(data)
    return record.stamp_ns, record.payload()


def validate_record_fully(data: dict[str, Any]) -> ExecutionRecord:
    """`validate_record` through pydantic for every input (the reference its fast path is
    tested against; it alone words the errors)."""
    if type(data) is not dict:  # pydantic says what it is not
        return _validated_by_pydantic(data)
    _check_sizes(data)
    _check_finite(data)
    finding = find_sensitive(data)
    if finding is not None:
        raise privacy_refusal(finding)
    return _validated_by_pydantic(data)


def _validated_by_pydantic(data: Any) -> ExecutionRecord:
    try:
        record = ExecutionRecord.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(record)"
        message = err["msg"]
        raise InvalidRecord(field, _reason_code(str(err["loc"][0]) if err["loc"] else "",
                                                err["type"], message), message) from exc
    if record.success and record.failure_reason:
        raise InvalidRecord("failure_reason", CONTRADICTORY,
                            "given while success is true (a result either succeeded or "
                            "failed for a reason)")
    return record


def _check_sizes(data: dict[str, Any]) -> None:
    """Refuse what is over a size limit before anything reads its contents: the privacy
    scan reads every character (0.3 s for a note of 1.6 MB), and a producer must not be
    able to buy that much of the logger's time with one result."""
    for name in ("skill_id",) + _TEXT_FIELDS:
        text, limit = data.get(name), MAX_NOTES if name == "notes" else MAX_TEXT
        if isinstance(text, str) and len(text) > limit:
            raise InvalidRecord(name, "oversized",
                                f"{len(text)} characters, more than {limit}")
    for kind in ("parameters", "observations"):
        values = data.get(kind)
        if not isinstance(values, dict):
            continue
        if len(values) > MAX_VALUES:
            raise InvalidRecord(kind, "oversized",
                                f"{len(values)} entries, more than {MAX_VALUES}")
        for key in values:
            if isinstance(key, str) and len(key) > MAX_KEY:  # the name is not repeated
                raise InvalidRecord(kind, "oversized",
                                    f"a name of {len(key)} characters, more than {MAX_KEY}")


def privacy_refusal(finding) -> InvalidRecord:
    return InvalidRecord(finding.field, f"privacy_{finding.category}",
                         f"looks like {finding.category.replace('_', ' ')}; refused at the "
                         "privacy boundary")


_FIELD_ORDER = tuple(ExecutionRecord.model_fields)
_FIELDS = frozenset(_FIELD_ORDER)
_isfinite = math.isfinite
_new, _set = object.__new__, object.__setattr__


def _record_of_checked(data: dict[str, Any]) -> ExecutionRecord:
    """The record pydantic's validation makes of data `_plainly_valid` accepted (equal to
    it, the mappings copied), built as model_construct does it, without its per-field
    bookkeeping (as costly as the validation itself)."""
    values = {name: data[name] for name in _FIELD_ORDER}
    values["parameters"] = dict(values["parameters"])
    values["observations"] = dict(values["observations"])
    record = _new(ExecutionRecord)
    _set(record, "__dict__", values)
    _set(record, "__pydantic_fields_set__", set(_FIELD_ORDER))
    _set(record, "__pydantic_extra__", None)
    _set(record, "__pydantic_private__", None)
    return record


def _plainly_valid(data: dict[str, Any]) -> bool:
    """True only for data that ExecutionRecord's validation accepts unchanged: every field
    given, each of exactly its type and within its bounds. Anything else (which may still
    be valid, e.g. fields left to their defaults) goes through pydantic, which alone says
    what is wrong: a subset of what it accepts, so acceptance and errors stay its own."""
    if type(data) is not dict or data.keys() != _FIELDS:
        return False
    get, plain = data.__getitem__, _PLAIN_NAMES
    stamp_ns, skill_id, duration_s = get("stamp_ns"), get("skill_id"), get("duration_s")
    if not (type(stamp_ns) is int and 0 <= stamp_ns <= MAX_STAMP_NS and type(skill_id) is str
            and (skill_id in plain or _plain_name(skill_id))
            and type(get("success")) is bool and type(duration_s) is float
            and _isfinite(duration_s) and duration_s >= 0.0):
        return False
    if get("success") and get("failure_reason"):  # contradictory: refused, with its reason
        return False
    for name in _SHORT_TEXTS:
        text = get(name)
        if type(text) is not str or len(text) > MAX_TEXT:
            return False
    notes = get("notes")
    if type(notes) is not str or len(notes) > MAX_NOTES:
        return False
    for name in ("parameters", "observations"):
        values = get(name)
        if type(values) is not dict or len(values) > MAX_VALUES:
            return False
        for key, value in values.items():
            if not (type(key) is str and (key in plain or _plain_name(key))
                    and type(value) is float and _isfinite(value)):
                return False
    return True


# Names found plain (a skill_id, or a parameter's or observation's name: the same few in
# every result), so that each is matched once, not in every result. Bounded: emptied
# when full (a flood of distinct names costs only their matching), under 1 MB.
_PLAIN_NAMES: set[str] = set()
_REMEMBERED_LENGTH = 128
_REMEMBERED_AT_MOST = 2048


def _plain_name(name: str) -> bool:
    """A name of at most MAX_TEXT (= MAX_KEY) characters that _NAME matches (so not
    empty); remembered when it is (and short)."""
    if len(name) > MAX_TEXT or not _NAME.match(name):
        return False
    if len(name) <= _REMEMBERED_LENGTH:
        if len(_PLAIN_NAMES) >= _REMEMBERED_AT_MOST:
            _PLAIN_NAMES.clear()
        _PLAIN_NAMES.add(name)
    return True


_TEXT_FIELDS = ("target_class", "environment", "zone", "failure_reason", "intent_id", "notes")
_SHORT_TEXTS = _TEXT_FIELDS[:-1]


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A stored execution result as the rules read it (same fields as ExecutionRecord,
    without pydantic's per-object cost: a pass reads hundreds of thousands)."""

    stamp_ns: int
    skill_id: str
    success: bool
    target_class: str
    environment: str
    zone: str
    failure_reason: str
    intent_id: str
    notes: str
    parameters: dict[str, float]
    observations: dict[str, float]
    duration_s: float


def record_from_payload(payload: dict[str, Any], stamp_ns: int) -> StoredRecord:
    """Rebuild a stored record for consolidation, checking only what the rules read.

    Stored payloads were fully validated on the way in; this fast path (no pydantic
    validation) keeps a pass cheap, and still turns a legacy or hand-made row that lacks
    the structured fields into InvalidRecord (the pass skips and counts it).
    """
    get = payload.get
    skill_id, success = get("skill_id"), get("success")
    if type(skill_id) is not str or not skill_id:
        raise InvalidRecord("skill_id", "empty_skill_id", "missing or empty")
    if type(success) is not bool:
        raise InvalidRecord("success", "missing_field", "missing or not a bool")
    texts = [get(name, "") for name in _TEXT_FIELDS]
    if any(type(text) is not str for text in texts):
        raise InvalidRecord("text field", "wrong_type", "not a string")
    numbers = []
    for name in ("parameters", "observations"):
        values = get(name, {})
        if type(values) is not dict or not all(
                type(v) in (int, float) and math.isfinite(v) for v in values.values()):
            raise InvalidRecord(name, "wrong_type", "not a mapping of finite numbers")
        numbers.append(values)
    target_class, environment, zone, failure_reason, intent_id, notes = texts
    fields = {"stamp_ns": stamp_ns, "skill_id": skill_id, "success": success,
              "target_class": target_class, "environment": environment, "zone": zone,
              "failure_reason": failure_reason, "intent_id": intent_id, "notes": notes,
              "parameters": numbers[0], "observations": numbers[1],
              "duration_s": get("duration_s", 0.0)}
    return StoredRecord(**fields)


def pairs_to_dict(kind: str, pairs: list[tuple[str, float]]) -> dict[str, float]:
    """KeyValue[] -> dict, refusing duplicate keys instead of silently keeping one."""
    out: dict[str, float] = {}
    for key, value in pairs:
        if key in out:
            raise InvalidRecord(kind, "duplicate_key", f"{kind} key {key!r} appears twice")
        out[key] = value
    return out


def message_fields(msg: Any) -> dict[str, Any]:
    """An ExecutionResult-shaped message's fields as plain data for `validate_record`
    (InvalidRecord on a duplicate key). An unstamped header gives stamp_ns 0: the caller
    puts its receive time there."""
    stamp = msg.header.stamp
    return {
        "stamp_ns": int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec),
        "skill_id": msg.skill_id, "target_class": msg.target_class,
        "environment": msg.environment, "zone": msg.zone,
        "parameters": pairs_to_dict("parameters", [(kv.key, kv.value) for kv in msg.parameters]),
        "observations": pairs_to_dict("observations",
                                      [(kv.key, kv.value) for kv in msg.observations]),
        "success": bool(msg.success), "failure_reason": msg.failure_reason,
        "duration_s": float(msg.duration_s), "intent_id": msg.intent_id, "notes": msg.notes,
    }

"""An execution result: its fields, their limits and their validation, written once.

A skill's attempt arrives as plain data (a ROS message's fields, a JSON line, a bag
record) and is checked here into an `ExecutionRecord`, or refused with an
`InvalidRecord` that names the field and a stable reason. Three checks read the same
fields and limits, each for its own caller:

- `ExecutionRecord` (pydantic): the reference; it alone words the errors.
- `plainly_valid`: the fast path, a subset of what the reference accepts (every field
  given, each of exactly its type and within its bounds); `check_sizes` and
  `check_finite` refuse what is oversized or not finite before anything else reads it.
- `stored_fields`: what the consolidation rules read of a payload already stored, the
  one check of a stored result (a pass and the result index both use it).

The privacy boundary (intake/privacy.py) and the receipt of a result are the intake's;
this module imports only the kernel.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from pydantic import (BaseModel, ConfigDict, Field, ValidationError, ValidationInfo,
                      field_validator)

from robot_memory.errors import InputError

NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$")
MAX_TEXT = 256
MAX_NOTES = 2048
MAX_VALUES = 64
MAX_KEY = MAX_TEXT  # a parameter's or observation's name (_plain_name relies on it)
MAX_STAMP_NS = 2**63 - 1  # what the store's 64-bit time columns hold
# Failure reasons that are safety-relevant by default: the rules remember them longer,
# and retention keeps such results live (RulesConfig.safety_failure_reasons overrides).
SAFETY_FAILURE_REASONS = ("collision", "dropped", "human_contact", "estop", "overforce")
# The refusal of a result that says both: success true and a failure_reason.
CONTRADICTORY = "contradictory_result"

# The free-text fields after skill_id, in the order a stored result's are read; all but
# the notes are short (MAX_TEXT), the notes may hold MAX_NOTES characters.
TEXT_FIELDS = ("target_class", "environment", "zone", "failure_reason", "intent_id", "notes")
SHORT_TEXTS = TEXT_FIELDS[:-1]
# Every text field's limit, skill_id's included (ExecutionRecord declares the same).
TEXT_LIMITS = {"skill_id": MAX_TEXT, **{name: MAX_TEXT for name in SHORT_TEXTS},
               "notes": MAX_NOTES}
# The two mappings of names to numbers.
VALUE_FIELDS = ("parameters", "observations")
# The names of an attempt (docs/consolidation.md#amendments): `attempt_id` names this
# result's attempt, `amends` the earlier attempt whose outcome this result corrects (its
# attempt_id, or AMENDS_EVENT + the event id record_event returned for it). Both optional,
# at most MAX_ATTEMPT characters of ATTEMPT_NAME; a payload keeps them only when given,
# so a result without them is stored as it was before they existed.
ATTEMPT_FIELDS = ("attempt_id", "amends")
MAX_ATTEMPT = 128
ATTEMPT_NAME = re.compile(r"[A-Za-z0-9._:/-]+")
AMENDS_EVENT = "event:"
TEXT_LIMITS.update({name: MAX_ATTEMPT for name in ATTEMPT_FIELDS})


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
        if not NAME.match(key):
            raise ValueError(f"{kind} key {key!r} is not a plain name")
        if not math.isfinite(value):
            raise ValueError(f"{kind} {key!r} is not finite ({value})")
    return values


class ExecutionRecord(BaseModel):
    """One skill attempt. `stamp_ns` is the attempt's end in ROS time (sim time in Gazebo)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    stamp_ns: int = Field(ge=0, le=MAX_STAMP_NS)
    skill_id: str = Field(min_length=1, max_length=TEXT_LIMITS["skill_id"])
    target_class: str = Field(default="", max_length=TEXT_LIMITS["target_class"])
    environment: str = Field(default="", max_length=TEXT_LIMITS["environment"])
    zone: str = Field(default="", max_length=TEXT_LIMITS["zone"])
    parameters: dict[str, float] = Field(default_factory=dict)
    observations: dict[str, float] = Field(default_factory=dict)
    success: bool
    failure_reason: str = Field(default="", max_length=TEXT_LIMITS["failure_reason"])
    duration_s: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    intent_id: str = Field(default="", max_length=TEXT_LIMITS["intent_id"])
    notes: str = Field(default="", max_length=TEXT_LIMITS["notes"])
    attempt_id: str = Field(default="", max_length=MAX_ATTEMPT)
    amends: str = Field(default="", max_length=MAX_ATTEMPT)

    @field_validator("skill_id")
    @classmethod
    def _skill_name(cls, value: str) -> str:
        if not NAME.match(value):
            raise ValueError(f"skill_id {value!r} is not a dotted name")
        return value

    @field_validator("attempt_id", "amends")
    @classmethod
    def _attempt_name(cls, value: str, info: ValidationInfo) -> str:
        problem = attempt_name_problem(value, amends=info.field_name == "amends")
        if problem:
            raise ValueError(problem)
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
        for name in ATTEMPT_FIELDS:
            if not payload[name]:
                del payload[name]
        payload["parameters"] = dict(payload["parameters"])
        payload["observations"] = dict(payload["observations"])
        return payload


# Every field of a result, in ExecutionRecord's order.
FIELDS = tuple(ExecutionRecord.model_fields)
_FIELD_SET = frozenset(FIELDS)
_FIELD_SET_WITHOUT_ATTEMPT = _FIELD_SET - frozenset(ATTEMPT_FIELDS)


def attempt_name_problem(value: str, amends: bool) -> str | None:
    """Why `value` cannot be an attempt_id (or, with `amends`, what an amends names), or
    None; empty is fine (not given). An attempt_id may not start with AMENDS_EVENT (an
    amends of that form names an event id: a positive integer)."""
    if not value:
        return None
    if ATTEMPT_NAME.fullmatch(value) is None:
        return "only letters, digits and . _ : / - are allowed"
    if value.startswith(AMENDS_EVENT):
        if not amends:
            return f"may not start with {AMENDS_EVENT!r} (an amends names an event id so)"
        number = value[len(AMENDS_EVENT):]
        if not number.isdigit() or int(number) <= 0:
            return f"{AMENDS_EVENT!r} is followed by the event id record_event returned"
    return None


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


def validated(data: Any) -> ExecutionRecord:
    """The record pydantic's validation makes of `data`, or InvalidRecord for its first
    error; a result that both succeeded and names a failure_reason is refused too."""
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
    if record.amends and record.amends == record.attempt_id:
        raise InvalidRecord("amends", "amends_itself",
                            "names this result's own attempt_id (an amendment names the "
                            "earlier attempt it corrects)")
    return record


def check_finite(data: dict[str, Any]) -> None:
    """Name the exact entry (parameters.force_n) when a value is NaN or infinite, and a
    stamp that is (not a wrong type: JSON lines give NaN stamps, and say non_finite_value)."""
    stamp = data.get("stamp_ns")
    if isinstance(stamp, float) and not math.isfinite(stamp):
        raise InvalidRecord("stamp_ns", "non_finite_value", f"{stamp} is not a finite number")
    for kind in VALUE_FIELDS:
        values = data.get(kind)
        if isinstance(values, dict):
            for key, value in values.items():
                if isinstance(value, float) and not math.isfinite(value):
                    raise InvalidRecord(f"{kind}.{key}", "non_finite_value",
                                        f"{value} is not a finite number")


def check_sizes(data: dict[str, Any]) -> None:
    """Refuse what is over a size limit before anything reads its contents: the privacy
    scan reads every character, and a producer must not be able to buy that much of
    the logger's time with one result."""
    for name, limit in TEXT_LIMITS.items():
        text = data.get(name)
        if isinstance(text, str) and len(text) > limit:
            raise InvalidRecord(name, "oversized",
                                f"{len(text)} characters, more than {limit}")
    for kind in VALUE_FIELDS:
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


_isfinite = math.isfinite
_new, _set = object.__new__, object.__setattr__


def record_of_checked(data: dict[str, Any]) -> ExecutionRecord:
    """The record pydantic's validation makes of data `plainly_valid` accepted (equal to
    it, the mappings copied), built as model_construct does it, without its per-field
    bookkeeping (as costly as the validation itself)."""
    values = {name: data.get(name, "") for name in FIELDS}
    values["parameters"] = dict(values["parameters"])
    values["observations"] = dict(values["observations"])
    record = _new(ExecutionRecord)
    _set(record, "__dict__", values)
    _set(record, "__pydantic_fields_set__", set(data))  # as given: the attempt's may not be
    _set(record, "__pydantic_extra__", None)
    _set(record, "__pydantic_private__", None)
    return record


def plainly_valid(data: dict[str, Any]) -> bool:
    """True only for data that ExecutionRecord's validation accepts unchanged: every field
    given, each of exactly its type and within its bounds. Anything else (which may still
    be valid, e.g. fields left to their defaults) goes through pydantic, which alone says
    what is wrong: a subset of what it accepts, so acceptance and errors stay its own."""
    if type(data) is not dict:
        return False
    keys = data.keys()
    if keys != _FIELD_SET:
        if keys != _FIELD_SET_WITHOUT_ATTEMPT:
            return False
    elif data["attempt_id"] or data["amends"]:  # rare: named attempts, checked in full
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
    for name in SHORT_TEXTS:
        text = get(name)
        if type(text) is not str or len(text) > MAX_TEXT:
            return False
    notes = get("notes")
    if type(notes) is not str or len(notes) > MAX_NOTES:
        return False
    for name in VALUE_FIELDS:
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
# when full (a flood of distinct names costs only their matching).
_PLAIN_NAMES: set[str] = set()
_REMEMBERED_LENGTH = 128
_REMEMBERED_AT_MOST = 2048


def _plain_name(name: str) -> bool:
    """A name of at most MAX_TEXT (= MAX_KEY) characters that NAME matches (so not
    empty); remembered when it is (and short)."""
    if len(name) > MAX_TEXT or not NAME.match(name):
        return False
    if len(name) <= _REMEMBERED_LENGTH:
        if len(_PLAIN_NAMES) >= _REMEMBERED_AT_MOST:
            _PLAIN_NAMES.clear()
        _PLAIN_NAMES.add(name)
    return True


# -- a stored result, as the consolidation rules read it --------------------------------

class StoredFields(NamedTuple):
    """What the rules read of a stored result (`stored_fields`): its texts in
    TEXT_FIELDS order, its values unchecked beyond being finite numbers."""

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


_NUMBER_TYPES = (int, float)


def _finite_numbers(values: dict) -> bool:
    return all(type(v) in _NUMBER_TYPES and _isfinite(v) for v in values.values())


def stored_fields(payload: dict[str, Any]) -> StoredFields:
    """The fields the rules read of a stored result's payload, or InvalidRecord.

    Stored payloads were fully validated on the way in; this checks only what the rules
    read (no pydantic validation: a pass, and an append, reads every result), and still
    turns a legacy or hand-made row that lacks the structured fields into InvalidRecord
    (the pass skips and counts it by its reason)."""
    get = payload.get
    skill_id, success = get("skill_id"), get("success")
    if type(skill_id) is not str or not skill_id:
        raise InvalidRecord("skill_id", "empty_skill_id", "missing or empty")
    if type(success) is not bool:
        raise InvalidRecord("success", "missing_field", "missing or not a bool")
    target_class, environment, zone, failure_reason, intent_id, notes = texts = [
        get(name, "") for name in TEXT_FIELDS]
    for text in texts:
        if type(text) is not str:
            raise InvalidRecord("text field", "wrong_type", "not a string")
    parameters, observations = get("parameters", {}), get("observations", {})
    for name, values in (("parameters", parameters), ("observations", observations)):
        if type(values) is not dict or not _finite_numbers(values):
            raise InvalidRecord(name, "wrong_type", "not a mapping of finite numbers")
    return StoredFields(skill_id, success, target_class, environment, zone, failure_reason,
                        intent_id, notes, parameters, observations)


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A stored execution result as the rules read it (same fields as ExecutionRecord,
    without pydantic's per-object cost)."""

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
    """A stored result rebuilt for the rules (`stored_fields`, with its stamp and
    duration), or InvalidRecord."""
    fields = stored_fields(payload)
    return StoredRecord(stamp_ns=stamp_ns, duration_s=payload.get("duration_s", 0.0),
                        **fields._asdict())

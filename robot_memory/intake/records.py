"""Validated execution results: the one shape every producer's input is checked into.

The ROS message, a JSON line from `robot-memory ingest` and a bag record all become an
`ExecutionRecord` before anything is stored; whatever fails becomes an
`InvalidRecord` that says which field is wrong and why. The fields, their limits and
their checks are the kernel's (robot_memory/execution_result.py); the intake adds the
privacy boundary (privacy.py) and the reading of a message's fields.
"""

from __future__ import annotations

from typing import Any

from robot_memory.execution_result import (CONTRADICTORY, MAX_KEY, MAX_NOTES, MAX_STAMP_NS,
                                           MAX_TEXT, MAX_VALUES, ExecutionRecord,
                                           InvalidRecord, StoredRecord, check_finite,
                                           check_sizes, plainly_valid, record_from_payload,
                                           record_of_checked, validated)
from robot_memory.intake.privacy import find_sensitive

# Also reached through this module by the intake's callers.
__all__ = ["CONTRADICTORY", "MAX_KEY", "MAX_NOTES", "MAX_STAMP_NS", "MAX_TEXT", "MAX_VALUES",
           "ExecutionRecord", "InvalidRecord", "StoredRecord", "message_fields",
           "pairs_to_dict", "privacy_refusal", "record_from_payload", "validate_record",
           "validate_record_fully", "validated_payload"]


def validate_record(data: dict[str, Any]) -> ExecutionRecord:
    """Build a record from plain data, or raise InvalidRecord for the first bad field.
    Secrets and personal data are refused here too (reason privacy_<category>); the
    detail names the field and the category, never the value."""
    if _plainly_valid_and_public(data):
        return record_of_checked(data)
    return validate_record_fully(data)


def _plainly_valid_and_public(data: dict[str, Any]) -> bool:
    """True for what every well-behaved producer sends, checked cheaply (plainly_valid),
    when nothing in it looks sensitive; raises the privacy refusal when something does;
    False for anything else, which pydantic then validates."""
    if not plainly_valid(data):
        return False
    finding = find_sensitive(data)
    if finding is not None:
        raise privacy_refusal(finding)
    return True


def validated_payload(data: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(stamp_ns, payload()) of `validate_record(data)`, refused alike, without building
    the record, for a caller that gives `data` away (the logger's intake, whose data
    was just read from a message): on the fast path data itself, its stamp taken out,
    becomes the payload. A result the log keeps needs no record object (making one and
    its payload was a good part of the intake's work per result)."""
    if plainly_valid(data):  # _plainly_valid_and_public, inline: once per result
        finding = find_sensitive(data)
        if finding is not None:
            raise privacy_refusal(finding)
        # Fast only without named attempts (plainly_valid): their fields, if given, are
        # empty, and a payload keeps them only when given (ExecutionRecord.payload).
        data.pop("attempt_id", None)
        data.pop("amends", None)
        return data.pop("stamp_ns"), data
    record = validate_record_fully(data)
    return record.stamp_ns, record.payload()


def validate_record_fully(data: dict[str, Any]) -> ExecutionRecord:
    """`validate_record` through pydantic for every input (the reference its fast path is
    tested against; it alone words the errors)."""
    if type(data) is not dict:  # pydantic says what it is not
        return validated(data)
    check_sizes(data)
    check_finite(data)
    finding = find_sensitive(data)
    if finding is not None:
        raise privacy_refusal(finding)
    return validated(data)


def privacy_refusal(finding) -> InvalidRecord:
    return InvalidRecord(finding.field, f"privacy_{finding.category}",
                         f"looks like {finding.category.replace('_', ' ')}; refused at the "
                         "privacy boundary")


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
        "attempt_id": msg.attempt_id, "amends": msg.amends,
    }

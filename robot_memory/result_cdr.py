"""An ExecutionResult's fields read straight from its serialized (CDR) bytes.

The logger takes results from the reader as bytes and reads the fields it stores here,
instead of letting rclpy build a message object (a Header, a Time and a KeyValue object
per entry, each through its Python constructor and checked setters): that was the
largest single cost per result. The fields come out exactly as `records.message_fields`
gives them for the message rclpy would have built: strings end at their first NUL and
are decoded as UTF-8 with replacement (what rclpy's conversion does), duplicate keys
raise the same InvalidRecord.

Only plain little-endian CDR (encapsulation CDR_LE, what ROS 2's DDS middlewares write
for these types) is read here; for anything else, or bytes that do not parse,
`result_fields_from_cdr` returns None and the caller lets rclpy deserialize them.
ROS-free: the layout is msg/ExecutionResult.msg's, field by field.
"""

from __future__ import annotations

import struct
from typing import Any

from robot_memory.records import pairs_to_dict

CDR_LE = b"\x00\x01"  # encapsulation id of plain little-endian CDR (XCDR1)
_ORIGIN = 4  # alignment counts from the end of the 4-byte encapsulation header

_u32 = struct.Struct("<I").unpack_from
_stamp = struct.Struct("<iI").unpack_from
_f64 = struct.Struct("<d").unpack_from


class _Malformed(Exception):
    """The bytes end early or hold a value CDR does not allow (e.g. a bool of 2)."""


def result_fields_from_cdr(data: bytes) -> dict[str, Any] | None:
    """`message_fields` of the serialized ExecutionResult `data`, or None when the bytes
    are not plain little-endian CDR of one (the caller then deserializes with rclpy,
    which reports what is wrong). Raises InvalidRecord for a duplicate key, as
    `message_fields` does."""
    if data[:2] != CDR_LE:
        return None
    try:
        return _read(data)
    except (_Malformed, struct.error, IndexError):
        return None


def _read(buf: bytes) -> dict[str, Any]:
    end = len(buf)

    def text(pos: int) -> tuple[str, int]:
        pos = (pos + 3) & ~3
        (n,) = _u32(buf, pos)
        pos += 4
        stop = pos + n
        if stop > end:
            raise _Malformed("string past the end")
        cut = buf.find(b"\0", pos, stop)  # rclpy's conversion stops at the first NUL
        return buf[pos:stop if cut < 0 else cut].decode("utf-8", "replace"), stop

    def values(pos: int) -> tuple[list[tuple[str, float]], int]:
        pos = (pos + 3) & ~3
        (count,) = _u32(buf, pos)
        pos += 4
        if count > (end - pos) // 12:  # each entry takes at least 12 bytes
            raise _Malformed("sequence past the end")
        pairs = []
        for _ in range(count):
            key, pos = text(pos)
            pos = _ORIGIN + ((pos - _ORIGIN + 7) & ~7)
            pairs.append((key, _f64(buf, pos)[0]))
            pos += 8
        return pairs, pos

    sec, nanosec = _stamp(buf, 4)
    _frame_id, pos = text(12)
    skill_id, pos = text(pos)
    target_class, pos = text(pos)
    environment, pos = text(pos)
    zone, pos = text(pos)
    parameters, pos = values(pos)
    observations, pos = values(pos)
    if pos >= end or buf[pos] > 1:  # CDR's bool is one byte, 0 or 1
        raise _Malformed("bool")
    success = buf[pos] == 1
    failure_reason, pos = text(pos + 1)
    pos = _ORIGIN + ((pos - _ORIGIN + 7) & ~7)
    (duration_s,) = _f64(buf, pos)
    intent_id, pos = text(pos + 8)
    notes, pos = text(pos)
    return {
        "stamp_ns": sec * 1_000_000_000 + nanosec,
        "skill_id": skill_id, "target_class": target_class,
        "environment": environment, "zone": zone,
        "parameters": _as_dict("parameters", parameters),
        "observations": _as_dict("observations", observations),
        "success": success, "failure_reason": failure_reason,
        "duration_s": duration_s, "intent_id": intent_id, "notes": notes,
    }


def _as_dict(kind: str, pairs: list[tuple[str, float]]) -> dict[str, float]:
    values = dict(pairs)
    if len(values) != len(pairs):
        return pairs_to_dict(kind, pairs)  # raises the duplicate_key InvalidRecord
    return values

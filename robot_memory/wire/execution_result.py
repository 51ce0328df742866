"""An ExecutionResult's fields read straight from its serialized (CDR) bytes.

The logger takes results from the reader as bytes and reads the fields here, instead of
letting rclpy build a message object (a Header, a Time and a KeyValue object per entry,
each through its Python constructor and checked setters): that was the largest single
cost per result. A general decoder (rosbags, which reads the bags) builds such objects
too; this one reads the one layout with `struct` straight into the plain data that
`records.message_fields` makes of a message, in about half of rosbags' time.

Only what rclpy reads alike is read here: plain little-endian CDR (what ROS 2's DDS
middlewares write for these types), strings of valid UTF-8 without a NUL (rclpy's
conversion cuts a string at its first NUL) and bools that are 0 or 1. For anything
else, or bytes that do not parse, `result_fields_from_cdr` returns None and the caller
lets rclpy deserialize them, so it is rclpy that says what is wrong. ROS-free.
"""

from __future__ import annotations

from collections.abc import Callable
from struct import Struct
from struct import error as StructError
from typing import Any

from robot_memory.intake.records import (MAX_KEY, MAX_NOTES, MAX_TEXT, MAX_VALUES,
                                         InvalidRecord, message_fields, pairs_to_dict)

CDR_LE = b"\x00\x01"  # encapsulation id of plain little-endian CDR (XCDR1)
# Positions are absolute in the bytes; CDR aligns relative to the end of the 4-byte
# encapsulation header, which changes nothing for 4-byte alignment but does for 8.
HEADER = 4
MAX_PADDING = 3  # serializers may pad the payload to a multiple of 4 bytes
# (buffer, position) -> a tuple of the values there, as struct's unpack_from.
unpack_u32, unpack_i32_u32 = Struct("<I").unpack_from, Struct("<iI").unpack_from
_f64 = Struct("<d").unpack_from


def _largest_valid_result() -> int:
    """Bytes of the largest ExecutionResult that can pass validation, serialized: every
    text at its limit in 4-byte UTF-8 (names are ASCII), frame_id (not kept) held to the
    texts' limit, each entry with its worst padding. Anything longer is refused from
    its length alone, before a byte of it is read."""
    def text(chars: int, bytes_per_char: int = 4) -> int:
        return 3 + 4 + chars * bytes_per_char + 1  # padding, length, UTF-8, NUL
    pairs = 3 + 4 + MAX_VALUES * (text(MAX_KEY, 1) + 7 + 8)
    return (HEADER + 8 + text(MAX_TEXT)  # header: stamp, frame_id
            + text(MAX_TEXT, 1) + 3 * text(MAX_TEXT)  # skill_id, target, environment, zone
            + 2 * pairs + 1 + text(MAX_TEXT) + 7 + 8  # success, failure_reason, duration_s
            + text(MAX_TEXT) + text(MAX_NOTES) + MAX_PADDING)  # intent_id, notes


MAX_RESULT_BYTES = _largest_valid_result()


def read_text(data: bytes, pos: int) -> tuple[str, int]:
    """(string, position after it) of the CDR string whose length is at `pos` (aligned
    here): a length counting the terminating NUL, the UTF-8 bytes, the NUL."""
    pos += -pos & 3
    (size,) = unpack_u32(data, pos)
    end = pos + 3 + size  # the terminating NUL
    raw = data[pos + 4:end]
    text = _READ.get(raw)
    if text is None or not size or data[end]:
        text = _checked_text(data, raw, size, end)
        if len(raw) <= _REMEMBERED_LENGTH:
            if len(_READ) >= _REMEMBERED_AT_MOST:
                _READ.clear()
            _READ[raw] = text
    return text, end + 1


def read_distinct_text(data: bytes, pos: int) -> tuple[str, int]:
    """read_text of a text that seldom repeats (a fact's key, its value as JSON): not
    looked for among the remembered texts, nor added to them, where it would push out
    the names that do repeat."""
    pos += -pos & 3
    (size,) = unpack_u32(data, pos)
    end = pos + 3 + size  # the terminating NUL
    return _checked_text(data, data[pos + 4:end], size, end), end + 1


def _checked_text(data: bytes, raw: bytes, size: int, end: int) -> str:
    """The text of a CDR string's bytes `raw` (its length field `size`, its NUL at
    `end`), checked as rclpy checks it: ValueError for what rclpy would refuse."""
    if not size or data[end] or raw.find(0) >= 0:
        raise ValueError  # left to rclpy
    return raw.decode()  # invalid UTF-8: UnicodeDecodeError


# Short strings read (bytes -> text): names, ids and reasons repeat in every result, and
# a lookup is cheaper than checking and decoding them again. Bounded: emptied when full
# (a flood of distinct strings costs only their reading), under 1 MB.
_READ: dict[bytes, str] = {}
_REMEMBERED_LENGTH = 128
_REMEMBERED_AT_MOST = 2048


def read_pairs(data: bytes, pos: int) -> tuple[list[tuple[str, float]], int]:
    """(KeyValue[] as (key, value) pairs, position after them)."""
    pos += -pos & 3
    (count,) = unpack_u32(data, pos)
    pos += 4
    if count > len(data):  # every entry takes bytes: a corrupt count, not a long loop
        raise ValueError  # left to rclpy
    pairs = []
    for _ in range(count):
        key, pos = read_text(data, pos)
        pos += -(pos - HEADER) & 7
        pairs.append((key, _f64(data, pos)[0]))
        pos += 8
    return pairs, pos


def result_fields_from_cdr(data: bytes) -> dict[str, Any] | None:
    """`message_fields` of the serialized ExecutionResult `data`, or None when rclpy
    must decode it (see above). Raises InvalidRecord for a duplicate key, as
    `message_fields` does."""
    if data[:2] != CDR_LE:
        return None
    # The fields in .msg order (header: stamp.sec, stamp.nanosec, frame_id).
    try:
        sec, nanosec = unpack_i32_u32(data, HEADER)
        _, pos = read_text(data, HEADER + 8)  # frame_id: not kept, but read as rclpy reads it
        skill_id, pos = read_text(data, pos)
        target_class, pos = read_text(data, pos)
        environment, pos = read_text(data, pos)
        zone, pos = read_text(data, pos)
        parameters, pos = read_pairs(data, pos)
        observations, pos = read_pairs(data, pos)
        success = data[pos]
        if success > 1:
            return None
        failure_reason, pos = read_text(data, pos + 1)
        pos += -(pos - HEADER) & 7
        (duration_s,) = _f64(data, pos)
        intent_id, pos = read_text(data, pos + 8)
        notes, pos = read_text(data, pos)
    except (ValueError, StructError, IndexError):  # UnicodeDecodeError is a ValueError
        return None
    if len(data) - pos > MAX_PADDING:
        return None
    return {
        "stamp_ns": sec * 1_000_000_000 + nanosec,
        "skill_id": skill_id, "target_class": target_class,
        "environment": environment, "zone": zone,
        "parameters": pairs_to_dict("parameters", parameters),
        "observations": pairs_to_dict("observations", observations),
        "success": success == 1, "failure_reason": failure_reason,
        "duration_s": duration_s, "intent_id": intent_id, "notes": notes,
    }


def serialized_result_fields(deserialize: Callable[[bytes], Any], data: bytes) -> dict[str, Any]:
    """The fields of a serialized ExecutionResult, as every reader of one gets them (the
    logger's topics with rclpy's `deserialize`, `import-bag` with rosbags'): read from the
    bytes here, and only what this reader does not handle (another encoding) through
    `deserialize` (bytes -> message). InvalidRecord, reason `oversized`, for more bytes
    than any valid result takes (refused unread), and `malformed` for bytes that do not
    deserialize either."""
    if len(data) > MAX_RESULT_BYTES:
        raise InvalidRecord("message", "oversized",
                            f"{len(data)} bytes serialized, more than the {MAX_RESULT_BYTES} "
                            "of the largest valid result; not read")
    fields = result_fields_from_cdr(data)
    if fields is None:
        try:
            message = deserialize(data)
        except Exception as exc:  # rclpy's RMWError, rosbags' SerdeError, their next ones
            raise InvalidRecord("message", "malformed",
                                f"{len(data)} bytes that do not deserialize as "
                                f"ExecutionResult ({type(exc).__name__})") from None
        fields = message_fields(message)
    return fields

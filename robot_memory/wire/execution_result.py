"""ExecutionResult (msg/ExecutionResult.msg): its fields read straight from its serialized
(CDR) bytes.

The logger takes results from the reader as bytes and reads the fields here, instead of
letting rclpy build a message object (a Header, a Time and a KeyValue object per entry,
each through its Python constructor and checked setters): that was the largest single
cost per result. A general decoder (rosbags, which reads the bags) builds such objects
too; this one reads the one layout with `struct` straight into the plain data that
`records.message_fields` makes of a message.

Only what rclpy reads alike is read here (wire/cdr.py: plain little-endian CDR, strings
of valid UTF-8 without a NUL, bools that are 0 or 1). For anything else
`result_fields_from_cdr` returns None, and `serialized_result_fields` refuses as
`malformed` whatever does not lie within its bytes (`structure_problem`), unread by
rclpy, whose deserializer some such bytes crash; only the rest (big-endian CDR, a string
or a bool rclpy reads otherwise) goes to rclpy. ROS-free.

The message before `attempt_id` and `amends` existed (OLD_LAYOUT) ended with `notes`; the
two came after it, so the bytes of such a result (a skill built against the older
message, a bag recorded before) end where `notes` does, and read here with both empty.
Only little-endian: a big-endian result of the older layout is refused as `malformed`.
"""

from __future__ import annotations

from collections.abc import Callable
from struct import error as StructError
from typing import Any

from robot_memory.execution_result import MAX_ATTEMPT
from robot_memory.intake.records import (MAX_KEY, MAX_NOTES, MAX_TEXT, MAX_VALUES,
                                         InvalidRecord, message_fields, pairs_to_dict)
from robot_memory.wire import cdr, key_value
from robot_memory.wire.cdr import (BODY, MAX_PADDING, PLAIN_LE_ID, Layout,
                                   encapsulation_problem, layouts_by_name, read_text,
                                   unpack_f64, unpack_i32_u32)
from robot_memory.wire.key_value import read_pairs

# The fields read below, in this order (test/core/test_wire_layouts.py holds it to
# msg/ExecutionResult.msg).
LAYOUT = Layout("robot_memory/ExecutionResult", (
    ("header", "std_msgs/Header"), ("skill_id", "string"), ("target_class", "string"),
    ("environment", "string"), ("zone", "string"),
    ("parameters", "robot_memory/KeyValue[]"), ("observations", "robot_memory/KeyValue[]"),
    ("success", "bool"), ("failure_reason", "string"), ("duration_s", "float64"),
    ("intent_id", "string"), ("notes", "string"), ("attempt_id", "string"),
    ("amends", "string")))
LAYOUTS = (LAYOUT,)
# The message before the attempt fields: every field but the last two.
OLD_LAYOUT = Layout(LAYOUT.type_name, LAYOUT.fields[:-2])
_NESTED = layouts_by_name(*cdr.LAYOUTS, *key_value.LAYOUTS)


def _largest_valid_result() -> int:
    """Bytes of the largest ExecutionResult that can pass validation, serialized: every
    text at its limit in 4-byte UTF-8 (names are ASCII), frame_id (not kept) held to the
    texts' limit, each entry with its worst padding. Anything longer is refused from
    its length alone, before a byte of it is read."""
    def text(chars: int, bytes_per_char: int = 4) -> int:
        return 3 + 4 + chars * bytes_per_char + 1  # padding, length, UTF-8, NUL
    pairs = 3 + 4 + MAX_VALUES * (text(MAX_KEY, 1) + 7 + 8)
    return (BODY + 8 + text(MAX_TEXT)  # header: stamp, frame_id
            + text(MAX_TEXT, 1) + 3 * text(MAX_TEXT)  # skill_id, target, environment, zone
            + 2 * pairs + 1 + text(MAX_TEXT) + 7 + 8  # success, failure_reason, duration_s
            + text(MAX_TEXT) + 2 * text(MAX_ATTEMPT, 1)  # intent_id, attempt_id, amends
            + text(MAX_NOTES) + MAX_PADDING)  # notes


MAX_RESULT_BYTES = _largest_valid_result()


def result_fields_from_cdr(data: bytes) -> dict[str, Any] | None:
    """`message_fields` of the serialized ExecutionResult `data`, or None when rclpy
    must decode it (see above). Raises InvalidRecord for a duplicate key, as
    `message_fields` does."""
    if data[:2] != PLAIN_LE_ID:
        return None
    # The fields in .msg order (header: stamp.sec, stamp.nanosec, frame_id).
    try:
        sec, nanosec = unpack_i32_u32(data, BODY)
        _, pos = read_text(data, BODY + 8)  # frame_id: not kept, but read as rclpy reads it
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
        pos += -(pos - BODY) & 7
        (duration_s,) = unpack_f64(data, pos)
        intent_id, pos = read_text(data, pos + 8)
        notes, pos = read_text(data, pos)
        if len(data) - pos <= MAX_PADDING:  # the older message: it ends with notes
            attempt_id = amends = ""
        else:
            attempt_id, pos = read_text(data, pos)
            amends, pos = read_text(data, pos)
    except (ValueError, StructError, IndexError):  # UnicodeDecodeError is a ValueError
        return None
    after = len(data) - pos  # padding: at most 3 bytes, at least what the header declares
    if after > MAX_PADDING or data[3] & 3 > after:
        return None
    return {
        "stamp_ns": sec * 1_000_000_000 + nanosec,
        "skill_id": skill_id, "target_class": target_class,
        "environment": environment, "zone": zone,
        "parameters": pairs_to_dict("parameters", parameters),
        "observations": pairs_to_dict("observations", observations),
        "success": success == 1, "failure_reason": failure_reason,
        "duration_s": duration_s, "intent_id": intent_id, "notes": notes,
        "attempt_id": attempt_id, "amends": amends,
    }


def structure_problem(data: bytes) -> str | None:
    """None when every field of the ExecutionResult `data` lies within its bytes, so that
    rclpy may be given them (wire/cdr.structure_problem); else what is wrong."""
    return cdr.structure_problem(data, LAYOUT, _NESTED)


def left_to_rclpy(data: bytes) -> str:
    """Why result_fields_from_cdr left these bytes, which the message's own deserializer
    then read, to that deserializer."""
    if data[:2] != PLAIN_LE_ID:
        return encapsulation_problem(data, PLAIN_LE_ID)
    return "a string with a NUL inside or none at its end, or not UTF-8; or a bool " \
           "neither 0 nor 1"


def serialized_result_fields(deserialize: Callable[[bytes], Any], data: bytes,
                             passed_over: Callable[[str, str], None] | None = None
                             ) -> dict[str, Any]:
    """The fields of a serialized ExecutionResult, as every reader of one gets them (the
    logger's topics with rclpy's `deserialize`, `import-bag` with rosbags'): read from the
    bytes here, and only what this reader does not handle (big-endian CDR, a string or a
    bool it leaves to rclpy) through `deserialize` (bytes -> message), which is then told
    to `passed_over` (message type, why). InvalidRecord, reason `oversized`, for more
    bytes than any valid result takes (refused unread), and `malformed` for bytes whose
    fields do not lie within them (refused before `deserialize` sees them) or that do not
    deserialize either."""
    if len(data) > MAX_RESULT_BYTES:
        raise InvalidRecord("message", "oversized",
                            f"{len(data)} bytes serialized, more than the {MAX_RESULT_BYTES} "
                            "of the largest valid result; not read")
    fields = result_fields_from_cdr(data)
    if fields is None:
        problem = structure_problem(data)
        if problem is not None:  # never given to `deserialize`: it may crash on them
            raise InvalidRecord("message", "malformed",
                                f"{len(data)} bytes that are no ExecutionResult: {problem}; "
                                "not read")
        try:
            message = deserialize(data)
        except Exception as exc:  # rclpy's RMWError, rosbags' SerdeError, their next ones
            raise InvalidRecord("message", "malformed",
                                f"{len(data)} bytes that do not deserialize as "
                                f"ExecutionResult ({type(exc).__name__})") from None
        fields = message_fields(message)
        if passed_over is not None:
            passed_over("ExecutionResult", left_to_rclpy(data))
    return fields

"""The logger reads results from their serialized bytes (robot_memory.wire.execution_result): for
any message, the fields are exactly those of the message rclpy deserializes from the
same bytes; bytes it does not read are left to rclpy when their fields lie within them,
and refused as malformed, unseen by rclpy, when not (test_cdr_crashes.py: why)."""

import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rclpy.serialization import deserialize_message, serialize_message

from robot_memory.msg import ExecutionResult, KeyValue
from robot_memory.intake.records import InvalidRecord, message_fields
from robot_memory.wire import execution_result as result_cdr
from robot_memory.wire.execution_result import (MAX_RESULT_BYTES, result_fields_from_cdr,
                                                structure_problem)
from robot_memory.ros.conversions import result_reader, serialized_result_fields
from robot_memory.bags.reading import make_typestore

# Any text (NULs, non-ASCII, lone surrogates are not sendable: rclpy encodes UTF-8).
_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_pairs = st.lists(st.tuples(st.sampled_from(["force_n", "mass_kg", "", "é", "a\0b"]) | _text,
                            st.floats(allow_nan=True, allow_infinity=True)), max_size=5)


def _message(d) -> ExecutionResult:
    msg = ExecutionResult(skill_id=d["skill_id"], target_class=d["target_class"],
                          environment=d["environment"], zone=d["zone"], success=d["success"],
                          failure_reason=d["failure_reason"], duration_s=d["duration_s"],
                          intent_id=d["intent_id"], notes=d["notes"])
    msg.header.stamp.sec, msg.header.stamp.nanosec = d["sec"], d["nanosec"]
    msg.header.frame_id = d["frame_id"]
    msg.parameters = [KeyValue(key=k, value=v) for k, v in d["parameters"]]
    msg.observations = [KeyValue(key=k, value=v) for k, v in d["observations"]]
    return msg


def _comparable(value):
    """Floats by their bits (NaN equals NaN, -0.0 differs from 0.0)."""
    if isinstance(value, float):
        return struct.pack("<d", value)
    if isinstance(value, dict):
        return [(k, _comparable(v)) for k, v in value.items()]
    return value


def _outcome(read, data):
    try:
        return {k: _comparable(v) for k, v in read(data).items()}
    except InvalidRecord as exc:
        return (exc.field, exc.reason, exc.detail)


@settings(max_examples=400, deadline=None)
@given(st.fixed_dictionaries({
    "sec": st.integers(-2**31, 2**31 - 1), "nanosec": st.integers(0, 2**32 - 1),
    "frame_id": _text, "skill_id": _text, "target_class": _text, "environment": _text,
    "zone": _text, "parameters": _pairs, "observations": _pairs, "success": st.booleans(),
    "failure_reason": _text, "duration_s": st.floats(), "intent_id": _text,
    "notes": st.text(max_size=300)}))
def test_fields_read_from_the_bytes_equal_those_of_the_deserialized_message(d):
    data = serialize_message(_message(d))
    assert data[:2] == b"\x00\x01"  # plain little-endian CDR: read here, not by rclpy
    assert structure_problem(data) is None  # and rclpy may read every message it writes
    expected = _outcome(lambda b: message_fields(deserialize_message(b, ExecutionResult)), data)
    assert _outcome(result_fields_from_cdr, data) == expected


def test_a_duplicate_key_is_refused_as_the_message_path_refuses_it():
    msg = _message({"sec": 1, "nanosec": 2, "frame_id": "", "skill_id": "s",
                    "target_class": "", "environment": "", "zone": "",
                    "parameters": [("force_n", 1.0), ("force_n", 2.0)], "observations": [],
                    "success": True, "failure_reason": "", "duration_s": 0.0,
                    "intent_id": "", "notes": ""})
    with pytest.raises(InvalidRecord) as info:
        result_fields_from_cdr(serialize_message(msg))
    assert (info.value.field, info.value.reason) == ("parameters", "duplicate_key")


def test_bytes_it_does_not_read_are_left_to_rclpy():
    msg = ExecutionResult(skill_id="manipulation.grasp", success=True, duration_s=math.pi)
    msg.parameters = [KeyValue(key="force_n", value=25.0)]
    data = serialize_message(msg)
    for unread in (b"\x00\x00" + data[2:],  # big-endian encapsulation id
                   data[:len(data) // 2],  # cut short
                   data[:-12]):
        assert result_fields_from_cdr(unread) is None
    # A bool that is neither 0 nor 1 (its byte follows the last sequence here).
    bool_at = data.index(struct.pack("<d", 25.0)) + 8
    assert result_fields_from_cdr(data[:bool_at] + b"\x02" + data[bool_at + 1:]) is None
    # A sequence count past the end of the bytes, invalid UTF-8, bytes after the message.
    count_at = data.index(b"\x08\x00\x00\x00force_n") - 4  # parameters: count, key length
    assert data[count_at:count_at + 4] == struct.pack("<I", 1)
    assert result_fields_from_cdr(
        data[:count_at] + struct.pack("<I", 2**31) + data[count_at + 4:]) is None
    key_at = data.index(b"force_n")
    assert result_fields_from_cdr(data[:key_at] + b"\xff" + data[key_at + 1:]) is None
    assert result_fields_from_cdr(data + bytes(8)) is None
    # Padding the header declares but the bytes after the message do not hold.
    padded = data + bytes(-len(data) & 3)
    assert result_fields_from_cdr(padded[:3] + bytes([len(padded) - len(data)]) + padded[4:])
    assert result_fields_from_cdr(padded[:3] + b"\x03" + padded[4:] + bytes(4)) is None
    assert result_fields_from_cdr(data) == message_fields(msg)
    # The conversion the logger uses refuses what lies past the bytes, unread by rclpy.
    assert serialized_result_fields(data) == message_fields(msg)
    with pytest.raises(InvalidRecord) as refused:
        serialized_result_fields(data[:len(data) // 2])
    assert refused.value.reason == "malformed"
    assert refused.value.detail.startswith(f"{len(data) // 2} bytes that are no "
                                           "ExecutionResult: ")


def test_out_of_bounds_bytes_are_refused_with_where_and_never_deserialized():
    msg = ExecutionResult(skill_id="manipulation.grasp", notes="n")
    msg.parameters = [KeyValue(key="force_n", value=25.0)]
    data = serialize_message(msg)
    count_at = data.index(b"\x08\x00\x00\x00force_n") - 4
    cases = {
        data[:3]: "3 bytes, fewer than the 4 of an encapsulation header",
        b"\x00\x01\x00\x02": "header.stamp.sec: its int32 at byte 4, past the end (4)",
        b"\x00\x07" + data[2:]: "unsupported encapsulation 0x0007 (read: plain CDR, 0x0000 "
                                "big-endian or 0x0001 little-endian)",
        b"\x01\x00" + data[2:]: "unsupported encapsulation 0x0100",
        data[:-1]: "amends: a string of 1 bytes at byte",
        data[:count_at] + struct.pack("<I", 2**31) + data[count_at + 4:]:
            "parameters: 2147483648 elements in the",
        data + bytes(8): "8 bytes after the message's",
        data[:3] + b"\x02" + data[4:]: "the header declares 2 bytes of padding, 0 follow",
    }

    def deserialize(_data):
        raise AssertionError("given to the deserializer")
    for bad, why in cases.items():
        assert why in structure_problem(bad)
        with pytest.raises(InvalidRecord) as refused:
            result_cdr.serialized_result_fields(deserialize, bad)
        assert refused.value.reason == "malformed" and why in refused.value.detail
        assert refused.value.detail.endswith("; not read")


_VALID = serialize_message(_message({
    "skill_id": "manipulation.grasp", "target_class": "cup", "environment": "lab",
    "zone": "z", "success": True, "failure_reason": "", "duration_s": 1.5,
    "intent_id": "i", "notes": "n", "sec": 5, "nanosec": 6, "frame_id": "base",
    "parameters": [("force_n", 20.0)], "observations": [("mass_kg", 0.2)]}))


@st.composite
def _broken(draw):
    """Random bytes, a valid result with bits flipped, or one cut short."""
    how = draw(st.sampled_from(["random", "flipped", "truncated"]))
    if how == "random":
        return draw(st.binary(max_size=400))
    if how == "truncated":
        return _VALID[:draw(st.integers(0, len(_VALID) - 1))]
    data = bytearray(_VALID)
    for at in draw(st.lists(st.integers(0, len(data) * 8 - 1), min_size=1, max_size=8)):
        data[at // 8] ^= 1 << (at % 8)
    return bytes(data)


@settings(max_examples=400, deadline=None)
@given(data=_broken() | st.binary(min_size=4, max_size=4).map(lambda b: b"\x00" + b[1:]))
def test_only_bytes_within_bounds_reach_the_deserializer(data):
    """Whatever a sample holds, the deserializer (rclpy's, which some bytes crash) is
    given it only when every field lies within its bytes (here: a stand-in for it)."""
    given_to_it = []

    def deserialize(data):
        given_to_it.append(data)
        raise ValueError("a stand-in")
    try:
        result_cdr.serialized_result_fields(deserialize, data)
    except InvalidRecord:
        pass
    assert not given_to_it or structure_problem(data) is None


@settings(max_examples=400, deadline=None)
@given(data=_broken())
def test_any_bytes_give_fields_or_a_refusal_never_another_error(data):
    """What a malformed sample can do to the intake: be read, or be refused (malformed,
    or a field's own reason); nothing else escapes to end the intake's round."""
    try:
        fields = serialized_result_fields(data)
    except InvalidRecord as refusal:
        assert refusal.reason in {"malformed", "duplicate_key", "oversized"}
    else:
        assert set(fields) >= {"stamp_ns", "skill_id", "notes"}


def test_more_bytes_than_any_valid_result_are_refused_unread():
    big = serialize_message(ExecutionResult(skill_id="a", notes="x" * 60_000))
    with pytest.raises(InvalidRecord) as refused:
        serialized_result_fields(big)
    assert refused.value.reason == "oversized"
    largest = _message({
        "skill_id": "s" * 256, "target_class": "\U0001F600" * 256,
        "environment": "\U0001F600" * 256, "zone": "\U0001F600" * 256, "success": True,
        "failure_reason": "\U0001F600" * 256, "duration_s": 1.0,
        "intent_id": "\U0001F600" * 256, "notes": "\U0001F600" * 2048, "sec": 1,
        "nanosec": 0, "frame_id": "\U0001F600" * 256,
        "parameters": [(f"{i:0256d}", 1.0) for i in range(64)],
        "observations": [(f"{i:0256d}", 1.0) for i in range(64)]})
    assert len(serialize_message(largest)) <= MAX_RESULT_BYTES  # every valid one is read
    assert serialized_result_fields(serialize_message(largest))["skill_id"] == "s" * 256


def test_a_result_rclpy_has_to_read_is_told_once_with_why():
    """What this reader leaves to rclpy and rclpy reads is told to the node (which says
    so once, ros/diagnostics.py): a big-endian result, as rosbags writes one, and a bool
    neither 0 nor 1. Bytes past the message are refused: nothing told."""
    msg = _message({"sec": 1, "nanosec": 2, "frame_id": "", "skill_id": "s",
                    "target_class": "cup", "environment": "", "zone": "",
                    "parameters": [("force_n", 25.0)], "observations": [], "success": True,
                    "failure_reason": "", "duration_s": 1.5, "intent_id": "", "notes": ""})
    data = serialize_message(msg)
    store, name = make_typestore(), "robot_memory/msg/ExecutionResult"
    big_endian = bytes(store.serialize_cdr(store.deserialize_cdr(data, name), name,
                                           little_endian=False))
    told = []
    read = result_reader(lambda message_type, why: told.append((message_type, why)))
    assert read(data) == message_fields(msg) and told == []
    assert read(big_endian) == message_fields(msg)
    assert told == [("ExecutionResult", "encapsulation header 00 00 00 00, not 00 01 "
                     "(plain little-endian CDR)")]
    bool_at = data.index(struct.pack("<d", 25.0) + bytes(4) + b"\x01") + 12
    assert read(data[:bool_at] + b"\x02" + data[bool_at + 1:]) == message_fields(msg)
    assert told[1] == ("ExecutionResult", "a string with a NUL inside or none at its end, "
                       "or not UTF-8; or a bool neither 0 nor 1")
    for refused in (data[:len(data) // 2], data + bytes(8)):  # refused, nothing told
        with pytest.raises(InvalidRecord):
            read(refused)
    assert len(told) == 2

"""SemanticFact and SemanticFactArray (msg/SemanticFact.msg, msg/SemanticFactArray.msg) in
CDR: an array (a pass's facts delta) read straight from its bytes into fact rows; a fact
written straight into the bytes of the SemanticFact it publishes as (`fact_element`), and
an array framed around such elements (`frame_fact_array`).

rclpy builds a message object per fact (a Time, a KeyValue per parameter, a dozen
checked fields) in one call that holds the interpreter throughout, in the process that
answers `ground`; read here, in Python, a request gets in at every switch interval, and
the rows come without the message objects in between. The other way, the consolidator
keeps each published fact as its bytes, written here once when it changes, instead of
a message object that rclpy converts again at every publish (ros/fact_snapshot.py,
which checks these bytes against the RMW's serializer once per process).

Only what rclpy reads alike is read here (wire/cdr.py); for anything else
`fact_array_from_cdr` returns None and the caller lets rclpy deserialize the bytes.
What a fact carries of its value besides value_json (success rate, recommended
parameters) is given by the caller (grounding/served.py decides it). ROS-free.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from struct import Struct
from struct import error as StructError
from typing import Any, Protocol

from robot_memory.wire.cdr import (BODY, MAX_PADDING, PLAIN_LE, Layout, encapsulation_problem,
                                   pack_i32_u32, pack_i64, put_padding, put_text, read_count,
                                   read_distinct_text, read_text, unpack_i32_u32, unpack_i64,
                                   unpack_two_i64)
from robot_memory.wire.key_value import put_pairs, skip_pairs

# The fields read and written below, in this order (test/core/test_wire_layouts.py holds
# them to the .msg files). SemanticFact's STATUS_* constants take no bytes.
FACT_LAYOUT = Layout("robot_memory/SemanticFact", (
    ("fact_id", "int64"), ("kind", "string"), ("key", "string"), ("status", "string"),
    ("confidence", "float64"), ("n_observations", "uint64"), ("has_success_rate", "bool"),
    ("success_rate", "float64"), ("recommended_parameters", "robot_memory/KeyValue[]"),
    ("value_json", "string"), ("last_supporting_event_id", "int64"),
    ("rule_version", "string"), ("last_updated", "builtin_interfaces/Time")))
ARRAY_LAYOUT = Layout("robot_memory/SemanticFactArray", (
    ("header", "std_msgs/Header"), ("identity_hash", "string"), ("run_event_id", "int64"),
    ("previous_run_event_id", "int64"), ("facts", "robot_memory/SemanticFact[]")))
LAYOUTS = (FACT_LAYOUT, ARRAY_LAYOUT)

# From the 8-aligned confidence on, the offsets are fixed: confidence, n_observations,
# has_success_rate, success_rate (skipped: 8-aligned again) and the count of
# recommended_parameters, in one unpack.
_AFTER_STATUS = Struct("<dQB7x8xI")
_after_status, _AFTER_STATUS_BYTES = _AFTER_STATUS.unpack_from, _AFTER_STATUS.size
_put_after_status = Struct("<dQB7xdI").pack  # _AFTER_STATUS with success_rate written
_pack_runs_and_count = Struct("<qqI").pack  # run_event_id, previous_run_event_id, len(facts)
# The smallest SemanticFact: an int64, four empty strings, two float64, a uint64, a bool,
# an empty sequence, an int64 and a Time.
_MIN_FACT_BYTES = 8 + 4 * 5 + 8 + 8 + 1 + 8 + 4 + 8 + 8


class PublishedFact(Protocol):
    """What fact_element reads of a fact row (store's FactRow is one)."""

    id: int
    kind: str
    key: str
    status: str
    confidence: float
    n_observations: int
    value_json: str
    last_supporting_event_id: int
    rule_version: str
    last_updated_ns: int


# A fact row of its ten stored columns: id, kind, key, value_json, status, confidence,
# n_observations, rule_version, last_supporting_event_id, last_updated_ns.
MakeFact = Callable[[tuple], Any]


@dataclass(frozen=True)
class FactArray:
    identity_hash: str
    run_event_id: int
    previous_run_event_id: int
    facts: list  # what `make_fact` made of each


def fact_array_from_cdr(data: bytes, make_fact: MakeFact) -> FactArray | None:
    """The serialized SemanticFactArray `data` as a FactArray of `make_fact`'s rows, or
    None when rclpy must decode it (another encoding, or bytes that do not parse: rclpy
    says what is wrong). success_rate and recommended_parameters are checked, not kept:
    value_json holds them."""
    if data[:4] != PLAIN_LE:  # options set (padding declared): rclpy checks them
        return None
    try:
        _, pos = read_text(data, BODY + 8)  # header: stamp (not kept), frame_id
        identity_hash, pos = read_text(data, pos)
        pos += -(pos - BODY) & 7
        run_event_id, previous_run_event_id = unpack_two_i64(data, pos)
        count, pos = read_count(data, pos + 16, _MIN_FACT_BYTES)
        facts = []
        for _ in range(count):
            pos += -(pos - BODY) & 7  # 8-aligned, written out: four times per fact
            (fact_id,) = unpack_i64(data, pos)
            kind, pos = read_text(data, pos + 8)
            key, pos = read_distinct_text(data, pos)
            status, pos = read_text(data, pos)
            pos += -(pos - BODY) & 7
            confidence, n_observations, has_success_rate, pairs = _after_status(data, pos)
            if has_success_rate > 1:  # checked as rclpy does
                return None
            pos += _AFTER_STATUS_BYTES
            if pairs:
                pos = skip_pairs(data, pos, pairs)
            value_json, pos = read_distinct_text(data, pos)
            pos += -(pos - BODY) & 7
            (last_supporting_event_id,) = unpack_i64(data, pos)
            rule_version, pos = read_text(data, pos + 8)
            pos += -pos & 3
            sec, nanosec = unpack_i32_u32(data, pos)
            pos += 8
            facts.append(make_fact((
                fact_id, kind, key, value_json, status, confidence, n_observations,
                rule_version, last_supporting_event_id, sec * 1_000_000_000 + nanosec)))
    except (ValueError, StructError, IndexError):  # UnicodeDecodeError is a ValueError
        return None
    if len(data) - pos > MAX_PADDING:
        return None
    return FactArray(identity_hash, run_event_id, previous_run_event_id, facts)


def left_to_rclpy(data: bytes) -> str:
    """Why fact_array_from_cdr left these bytes, which rclpy then read, to rclpy."""
    if data[:4] != PLAIN_LE:
        return encapsulation_problem(data, PLAIN_LE)
    return "a string with a NUL, a bool neither 0 nor 1, or bytes past the message"


def fact_element(fact: PublishedFact, success_rate: float | None,
                 recommended_parameters: Sequence[tuple[str, float]]) -> bytes:
    """The CDR of the SemanticFact `fact` publishes as (as ros/conversions.fact_to_msg
    makes it), with this success rate (None: has_success_rate false) and these
    recommended parameters (name, median), as an element of a SemanticFactArray:
    starting 8-aligned, so offsets within it align as they do in the array. Padding
    bytes are zeros."""
    out = bytearray(pack_i64(fact.id))
    put_text(out, fact.kind)
    put_text(out, fact.key)
    put_text(out, fact.status)
    put_padding(out, 8)
    out += _put_after_status(float(fact.confidence), int(fact.n_observations),
                             success_rate is not None,
                             0.0 if success_rate is None else success_rate,
                             len(recommended_parameters))
    if recommended_parameters:
        put_pairs(out, recommended_parameters)
    put_text(out, fact.value_json)
    put_padding(out, 8)
    out += pack_i64(int(fact.last_supporting_event_id))
    put_text(out, fact.rule_version)
    put_padding(out, 4)
    out += pack_i32_u32(*divmod(int(fact.last_updated_ns), 1_000_000_000))
    return bytes(out)


def frame_fact_array(identity_hash: str, run_event_id: int, previous_run_event_id: int,
                     stamp_sec: int, stamp_nanosec: int, elements: Sequence[bytes]) -> bytes:
    """A serialized SemanticFactArray (header.frame_id empty) around fact elements
    (fact_element's): the array's sequence is its elements' encodings, each starting
    8-aligned (a SemanticFact begins with an int64), behind the header fields."""
    body = bytearray(pack_i32_u32(stamp_sec, stamp_nanosec))
    put_text(body, "")  # header.frame_id
    put_text(body, identity_hash)
    put_padding(body, 8)
    body += _pack_runs_and_count(run_event_id, previous_run_event_id, len(elements))
    for element in elements:
        put_padding(body, 8)
        body += element
    put_padding(body, 4)
    return PLAIN_LE + body  # bytes: the left operand's type

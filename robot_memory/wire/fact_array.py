"""A SemanticFactArray (a pass's facts delta) read straight from its serialized (CDR)
bytes into the FactRows its holder keeps; and a FactRow written straight into the CDR
of the SemanticFact it publishes as (`fact_element`).

rclpy builds a message object per fact (a Time, a KeyValue per parameter, a dozen
checked fields) in one call that holds the interpreter throughout: 14 ms for a pass's
delta of 1,500 facts, in the process that answers `ground`, whose requests waited it
out. Read here, in Python, the same work takes about as long but lets a request in at
every switch interval, and gives FactRows without the message objects in between.

As in intake/result_cdr.py, only what rclpy reads alike is read here (plain
little-endian CDR, strings of valid UTF-8 without a NUL, bools 0 or 1); for anything
else `fact_array_from_cdr` returns None and the caller lets rclpy deserialize the
bytes.

The other way, a pass's 1,500 changed facts made into SemanticFact objects and
serialized by rclpy took 40 ms of the consolidator's interpreter after every pass; the
same bytes written here take a fifth of that. Its publisher checks them against the
RMW's serializer once per process (ros/fact_snapshot.framing_supported). ROS-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from struct import Struct
from struct import error as StructError

from robot_memory.wire.execution_result import (CDR_LE, HEADER, MAX_PADDING, read_distinct_text,
                                                read_text, unpack_i32_u32, unpack_u32)
from robot_memory.store import FactRow, fact_row_from_columns

_PLAIN = CDR_LE + b"\x00\x00"  # and no options
_i64, _q2 = Struct("<q").unpack_from, Struct("<qq").unpack_from
# From the 8-aligned confidence on, the offsets are fixed: confidence, n_observations,
# has_success_rate, success_rate (skipped: 8-aligned again) and the count of
# recommended_parameters, in one unpack.
_AFTER_STATUS = Struct("<dQB7x8xI")
_after_status, _AFTER_STATUS_BYTES = _AFTER_STATUS.unpack_from, _AFTER_STATUS.size
# The smallest SemanticFact: an int64, four empty strings, two float64, a uint64, a bool,
# an empty sequence, an int64 and a Time.
_MIN_FACT_BYTES = 8 + 4 * 5 + 8 + 8 + 1 + 8 + 4 + 8 + 8


_put_u32, _put_i64, _put_f64 = Struct("<I").pack, Struct("<q").pack, Struct("<d").pack
_put_after_status = Struct("<dQB7xdI").pack  # _AFTER_STATUS with success_rate written
_put_stamp = Struct("<iI").pack
_ZEROS = tuple(bytes(n) for n in range(8))  # padding, made once: bytes(n) per pad is 2x


@dataclass(frozen=True)
class FactArray:
    identity_hash: str
    run_event_id: int
    previous_run_event_id: int
    facts: list[FactRow]


def _aligned8(pos: int) -> int:
    return pos + (-(pos - HEADER) & 7)


def _past_pairs(data: bytes, pos: int, count: int) -> int:
    """The position after the `count` KeyValues at `pos`, their keys read as read_pairs
    reads them (a key rclpy would refuse is refused here too) and their values skipped."""
    if count > len(data):  # every entry takes bytes: a corrupt count, not a long loop
        raise ValueError  # left to rclpy
    for _ in range(count):
        _, pos = read_text(data, pos)
        pos += (-(pos - HEADER) & 7) + 8  # a value cut short fails the next read
    return pos


def fact_array_from_cdr(data: bytes) -> FactArray | None:
    """The serialized SemanticFactArray `data` as a FactArray, or None when rclpy must
    decode it (another encoding, or bytes that do not parse: rclpy says what is wrong)."""
    if data[:4] != _PLAIN:  # options set (padding declared): rclpy checks them
        return None
    try:
        _, pos = read_text(data, HEADER + 8)  # header: stamp (not kept), frame_id
        identity_hash, pos = read_text(data, pos)
        pos = _aligned8(pos)
        run_event_id, previous_run_event_id = _q2(data, pos)
        pos += 16
        (count,) = unpack_u32(data, pos)
        pos += 4
        if count * _MIN_FACT_BYTES > len(data):  # a corrupt count, not a long loop
            return None
        facts = []
        for _ in range(count):
            pos += -(pos - HEADER) & 7  # _aligned8, written out: four times per fact
            (fact_id,) = _i64(data, pos)
            kind, pos = read_text(data, pos + 8)
            key, pos = read_distinct_text(data, pos)
            status, pos = read_text(data, pos)
            pos += -(pos - HEADER) & 7
            # success_rate and recommended_parameters are not kept (value_json has them)
            confidence, n_observations, has_success_rate, pairs = _after_status(data, pos)
            if has_success_rate > 1:  # checked as rclpy does
                return None
            pos += _AFTER_STATUS_BYTES
            if pairs:
                pos = _past_pairs(data, pos, pairs)
            value_json, pos = read_distinct_text(data, pos)
            pos += -(pos - HEADER) & 7
            (last_supporting_event_id,) = _i64(data, pos)
            rule_version, pos = read_text(data, pos + 8)
            pos += -pos & 3
            sec, nanosec = unpack_i32_u32(data, pos)
            pos += 8
            facts.append(fact_row_from_columns((
                fact_id, kind, key, value_json, status, confidence, n_observations,
                rule_version, last_supporting_event_id, sec * 1_000_000_000 + nanosec)))
    except (ValueError, StructError, IndexError):  # UnicodeDecodeError is a ValueError
        return None
    if len(data) - pos > MAX_PADDING:
        return None
    return FactArray(identity_hash, run_event_id, previous_run_event_id, facts)


def served_fields(value: dict) -> tuple[float | None, list[tuple[str, float]]]:
    """What a SemanticFact carries of its fact's value beside value_json: the success
    rate (None: the kind has none) and each recommended parameter's median, by name."""
    rate = value.get("rate")
    return (None if rate is None else float(rate),
            [(name, float(band["median"]))
             for name, band in sorted(value.get("recommended_parameters", {}).items())])


def put_padding(out: bytearray, boundary: int) -> None:
    """Zeros up to a multiple of `boundary` (a power of two), counted from the start of
    `out`: the body of a message after its 4-byte encapsulation header, or an element
    that starts aligned to `boundary`."""
    out += _ZEROS[-len(out) & (boundary - 1)]


def put_text(out: bytearray, text: str) -> None:
    """A CDR string: 4-aligned length (with its NUL), UTF-8 bytes, NUL."""
    encoded = text.encode()
    put_padding(out, 4)
    out += _put_u32(len(encoded) + 1)
    out += encoded
    out += b"\x00"


def fact_element(fact: FactRow) -> bytes:
    """The CDR of the SemanticFact `fact` publishes as (ros/conversions.fact_to_msg), as
    an element of a SemanticFactArray: starting 8-aligned, so offsets within it align as
    they do in the array. Padding bytes are zeros."""
    rate, parameters = served_fields(fact.peek_value())
    out = bytearray(_put_i64(fact.id))
    put_text(out, fact.kind)
    put_text(out, fact.key)
    put_text(out, fact.status)
    put_padding(out, 8)
    out += _put_after_status(float(fact.confidence), int(fact.n_observations),
                             rate is not None, 0.0 if rate is None else rate,
                             len(parameters))
    for name, median in parameters:
        put_text(out, name)
        put_padding(out, 8)
        out += _put_f64(median)
    put_text(out, fact.value_json)
    put_padding(out, 8)
    out += _put_i64(int(fact.last_supporting_event_id))
    put_text(out, fact.rule_version)
    put_padding(out, 4)
    out += _put_stamp(*divmod(int(fact.last_updated_ns), 1_000_000_000))
    return bytes(out)

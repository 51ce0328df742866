"""KeyValue (msg/KeyValue.msg) in CDR: a sequence of them, as ExecutionResult's parameters
and observations and SemanticFact's recommended_parameters carry it. ROS-free."""

from __future__ import annotations

from robot_memory.wire.cdr import (BODY, Layout, pack_f64, put_padding, put_text, read_text,
                                   unpack_f64, unpack_u32)

LAYOUT = Layout("robot_memory/KeyValue", (("key", "string"), ("value", "float64")))
LAYOUTS = (LAYOUT,)


def read_pairs(data: bytes, pos: int) -> tuple[list[tuple[str, float]], int]:
    """(KeyValue[] at `pos` as (key, value) pairs, position after them)."""
    # cdr.read_count, written out: twice per result, on the logger's intake path
    pos += -pos & 3
    (count,) = unpack_u32(data, pos)
    if count > len(data):  # every entry takes bytes: a corrupt count, not a long loop
        raise ValueError  # left to rclpy
    pos += 4
    pairs = []
    for _ in range(count):
        key, pos = read_text(data, pos)
        pos += -(pos - BODY) & 7
        pairs.append((key, unpack_f64(data, pos)[0]))
        pos += 8
    return pairs, pos


def skip_pairs(data: bytes, pos: int, count: int) -> int:
    """The position after the `count` KeyValues at `pos` (past their count), their keys
    read as read_pairs reads them (a key rclpy would refuse is refused here too) and their
    values skipped."""
    if count > len(data):  # every entry takes bytes: a corrupt count, not a long loop
        raise ValueError  # left to rclpy
    for _ in range(count):
        _, pos = read_text(data, pos)
        pos += (-(pos - BODY) & 7) + 8  # a value cut short fails the next read
    return pos


def put_pairs(out: bytearray, pairs: list[tuple[str, float]]) -> None:
    """The elements of a KeyValue[] (its count written before them by the caller), in
    `out` counted from the message body's start."""
    for key, value in pairs:
        put_text(out, key)
        put_padding(out, 8)
        out += pack_f64(value)

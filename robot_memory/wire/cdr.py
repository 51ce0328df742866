"""CDR primitives, written once for every codec of wire/: the encapsulation header,
alignment and padding, strings, integers, floats and sequence counts; and the layouts of
the two standard types the stamped messages carry (builtin_interfaces/Time, std_msgs/Header).

Plain little-endian CDR (XCDR1) only: what ROS 2's DDS middlewares write for these types.
Readers check what rclpy checks (a string is valid UTF-8 with its terminating NUL and no
other; a bool is 0 or 1) and raise ValueError, struct.error or IndexError otherwise, for
the codec to leave the bytes to rclpy, which then says what is wrong. Writers give the
bytes rclpy's serializer gives, padding as zeros.

Positions are absolute in the bytes. CDR aligns relative to the end of the 4-byte
encapsulation header (`BODY`): that changes nothing for 4-byte alignment, but does for 8.
"""

from __future__ import annotations

from dataclasses import dataclass
from struct import Struct

PLAIN_LE_ID = b"\x00\x01"  # encapsulation id of plain little-endian CDR (XCDR1)
PLAIN_LE = PLAIN_LE_ID + b"\x00\x00"  # the whole header: that id, and no options
BODY = 4  # where the message starts, after the encapsulation header; alignment counts from here
MAX_PADDING = 3  # serializers may pad the payload to a multiple of 4 bytes

# (buffer, position) -> a tuple of the values there, as struct's unpack_from.
unpack_u32 = Struct("<I").unpack_from
unpack_i32_u32 = Struct("<iI").unpack_from  # a builtin_interfaces/Time: sec, nanosec
unpack_i64 = Struct("<q").unpack_from
unpack_two_i64 = Struct("<qq").unpack_from
unpack_f64 = Struct("<d").unpack_from

# value(s) -> bytes, as struct's pack.
pack_u32 = Struct("<I").pack
pack_i64 = Struct("<q").pack
pack_f64 = Struct("<d").pack
pack_i32_u32 = Struct("<iI").pack  # a builtin_interfaces/Time
_ZEROS = tuple(bytes(n) for n in range(8))  # padding, made once: bytes(n) per pad costs more


@dataclass(frozen=True)
class Layout:
    """The fields a codec encodes for one message type, in .msg order: (name, type), the
    type as the .msg file writes it (`float64`, `string`, `KeyValue[]`), a message type
    with its package (`robot_memory/KeyValue[]`): wire/msg_files.msg_fields reads it so,
    and test/core/test_wire_layouts.py holds each layout to its file."""

    type_name: str  # package/Type, e.g. robot_memory/ExecutionResult
    fields: tuple[tuple[str, str], ...]


TIME = Layout("builtin_interfaces/Time", (("sec", "int32"), ("nanosec", "uint32")))
STD_HEADER = Layout("std_msgs/Header", (("stamp", "builtin_interfaces/Time"),
                                        ("frame_id", "string")))
LAYOUTS = (TIME, STD_HEADER)


def encapsulation_problem(data: bytes, header: bytes) -> str:
    """Why bytes whose encapsulation header is not `header` are not the codec's."""
    return (f"encapsulation header {data[:4].hex(' ') or 'missing'}, not {header.hex(' ')} "
            "(plain little-endian CDR)")


# -- reading ----------------------------------------------------------------------------
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


# Short strings read (bytes -> text): names, ids and reasons repeat in every message, and
# a lookup is cheaper than checking and decoding them again. Bounded: emptied when full
# (a flood of distinct strings costs only their reading).
_READ: dict[bytes, str] = {}
_REMEMBERED_LENGTH = 128
_REMEMBERED_AT_MOST = 2048


def read_count(data: bytes, pos: int, least: int = 1) -> tuple[int, int]:
    """(element count, position after it) of the sequence at `pos` (aligned here).
    ValueError for more elements than the bytes could hold, each taking at least `least`
    bytes: a corrupt count, not a long loop."""
    pos += -pos & 3
    (count,) = unpack_u32(data, pos)
    if count * least > len(data):
        raise ValueError  # left to rclpy
    return count, pos + 4


# -- writing ----------------------------------------------------------------------------
def put_padding(out: bytearray, boundary: int) -> None:
    """Zeros up to a multiple of `boundary` (a power of two), counted from the start of
    `out`: the body of a message after its 4-byte encapsulation header, or an element
    that starts aligned to `boundary`."""
    out += _ZEROS[-len(out) & (boundary - 1)]


def put_text(out: bytearray, text: str) -> None:
    """A CDR string: 4-aligned length (with its NUL), UTF-8 bytes, NUL."""
    encoded = text.encode()
    put_padding(out, 4)
    out += pack_u32(len(encoded) + 1)
    out += encoded
    out += b"\x00"

"""CDR primitives, written once for every codec of wire/: the encapsulation header,
alignment and padding, strings, integers, floats and sequence counts; and the layouts of
the two standard types the stamped messages carry (builtin_interfaces/Time, std_msgs/Header).

Plain little-endian CDR (XCDR1) only: what ROS 2's DDS middlewares write for these types.
Readers check what rclpy checks (a string is valid UTF-8 with its terminating NUL and no
other; a bool is 0 or 1) and raise ValueError, struct.error or IndexError otherwise.
Writers give the bytes rclpy's serializer gives, padding as zeros.

What a reader does not read goes to rclpy's deserializer only once `structure_problem`
has found every length, count and field of it within the bytes (plain CDR of either byte
order): that deserializer does not check bounds everywhere, and some bytes crash the
process (see there). Bytes that fail it are refused as malformed, unread by rclpy.

Positions are absolute in the bytes. CDR aligns relative to the end of the 4-byte
encapsulation header (`BODY`): that changes nothing for 4-byte alignment, but does for 8.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from struct import Struct

PLAIN_LE_ID = b"\x00\x01"  # encapsulation id of plain little-endian CDR (XCDR1)
PLAIN_LE = PLAIN_LE_ID + b"\x00\x00"  # the whole header: that id, and no options
PLAIN_BE_ID = b"\x00\x00"  # encapsulation id of plain big-endian CDR (XCDR1)
BODY = 4  # where the message starts, after the encapsulation header; alignment counts from here
MAX_PADDING = 3  # serializers may pad the payload to a multiple of 4 bytes

# (buffer, position) -> a tuple of the values there, as struct's unpack_from.
unpack_u32 = Struct("<I").unpack_from
unpack_u32_be = Struct(">I").unpack_from
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


def layouts_by_name(*layouts: Layout) -> dict[str, Layout]:
    """type_name -> layout, for structure_problem to find the nested types."""
    return {layout.type_name: layout for layout in layouts}


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
        raise ValueError  # past the end: structure_problem refuses it
    return count, pos + 4


# -- bounds -----------------------------------------------------------------------------
_FIXED_SIZE = {"bool": 1, "byte": 1, "char": 1, "int8": 1, "uint8": 1, "int16": 2,
               "uint16": 2, "int32": 4, "uint32": 4, "float32": 4, "int64": 8, "uint64": 8,
               "float64": 8}


def structure_problem(data: bytes, layout: Layout, nested: Mapping[str, Layout]
                      ) -> str | None:
    """None when the serialized `layout` in `data` lies within its bytes: an encapsulation
    header of plain CDR (0x0000 big-endian, 0x0001 little-endian), every string length
    and sequence count inside the bytes, the message ending before the padding its header
    declares, and at most MAX_PADDING bytes after it. Else what is wrong, for a
    `malformed` refusal. Bounds only: a string's bytes and a bool's value are not looked
    at (rclpy reads those, and is safe to). `nested`: the layouts of the message types
    `layout` nests, by name (layouts_by_name).

    This must hold before bytes go to rclpy's deserializer. Fast CDR, under it, takes the
    padding the header's options declare off the end of the bytes; when nothing follows
    the header, the end moves before the start, and every read after that runs past the
    buffer: the 4 bytes 00 01 00 02 end the process (test/ros/test_cdr_crashes.py). The
    walk below reads what Fast CDR reads, aligned as it aligns (relative to the body)."""
    if len(data) < BODY:
        return f"{len(data)} bytes, fewer than the {BODY} of an encapsulation header"
    if data[:2] == PLAIN_LE_ID:
        count_at = unpack_u32
    elif data[:2] == PLAIN_BE_ID:
        count_at = unpack_u32_be
    else:
        return (f"unsupported encapsulation 0x{data[:2].hex()} (read: plain CDR, 0x0000 "
                "big-endian or 0x0001 little-endian)")
    try:
        end = _past_fields(data, BODY, layout, "", nested, count_at)
    except ValueError as past:
        return str(past)
    after, declared = len(data) - end, data[3] & 3
    if after > MAX_PADDING:
        return (f"{after} bytes after the message's {end - BODY}, more than the "
                f"{MAX_PADDING} of padding")
    if declared > after:
        return (f"the header declares {declared} bytes of padding, {after} follow the "
                "message")
    return None


def _past_fields(data: bytes, pos: int, layout: Layout, path: str,
                 nested: Mapping[str, Layout], count_at) -> int:
    """The position after `layout`'s fields at `pos`; ValueError naming the field whose
    bytes would lie past the end."""
    for name, type_ in layout.fields:
        pos = _past_one(data, pos, type_, path + name, nested, count_at)
    return pos


def _past_one(data: bytes, pos: int, type_: str, path: str, nested: Mapping[str, Layout],
              count_at) -> int:
    end = len(data)
    if type_.endswith("[]"):
        pos += -pos & 3
        if pos + 4 > end:
            raise ValueError(f"{path}: its count at byte {pos}, past the end ({end})")
        (count,) = count_at(data, pos)
        pos += 4
        if count > end - pos:  # every element takes a byte at least: as rclpy checks it
            raise ValueError(f"{path}: {count} elements in the {end - pos} bytes left")
        for i in range(count):
            pos = _past_one(data, pos, type_[:-2], f"{path}[{i}]", nested, count_at)
        return pos
    size = _FIXED_SIZE.get(type_)
    if size is not None:
        pos += -(pos - BODY) & (size - 1)
        if pos + size > end:
            raise ValueError(f"{path}: its {type_} at byte {pos}, past the end ({end})")
        return pos + size
    if type_ == "string":
        pos += -pos & 3
        if pos + 4 > end:
            raise ValueError(f"{path}: its length at byte {pos}, past the end ({end})")
        (size,) = count_at(data, pos)
        if size > end - pos - 4:
            raise ValueError(f"{path}: a string of {size} bytes at byte {pos}, "
                             f"{end - pos - 4} left")
        return pos + 4 + size
    return _past_fields(data, pos, nested[type_], path + ".", nested, count_at)


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

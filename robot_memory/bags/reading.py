"""Reading rosbag2 bags (MCAP or SQLite3 storage) without ROS, and salvaging damaged ones.

The normal path is the `rosbags` library's reader. When it refuses a bag (a cut MCAP
file has no footer, a damaged SQLite3 file fails mid-read), each storage file is read
again by a tolerant scanner that keeps every record it can parse and says where it
had to stop or skip: a damaged bag gives what can be read, and the reason for the rest.
"""

from __future__ import annotations

import hashlib
import sqlite3
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from robot_memory.errors import InputError
from robot_memory.wire.msg_files import our_msg_dir

MCAP_MAGIC = b"\x89MCAP0\r\n"
EXECUTION_RESULT_TYPE = "robot_memory/msg/ExecutionResult"


class BagError(InputError):
    """Raised when PATH is not a bag at all (no metadata.yaml, no .mcap or .db3 file),
    or a message type cannot be decoded because its definition is nowhere to be found."""


@dataclass(frozen=True)
class RawMessage:
    topic: str
    msgtype: str
    log_time_ns: int  # the bag's receive time
    data: bytes


@dataclass(frozen=True)
class Topic:
    name: str
    msgtype: str
    msgdef: str  # ros2msg definition text embedded in the bag ('' when absent)
    listed_count: int | None  # what the bag's index says (None when unknown)


@dataclass
class BagContents:
    """What could be read: topics, messages (lazily), and what could not be read."""

    storage: str
    files: list[Path]
    topics: dict[str, Topic] = field(default_factory=dict)
    damage: list[str] = field(default_factory=list)


def bag_files(path: Path) -> tuple[str, list[Path], list[Path]]:
    """(storage, storage files, files hashed for the bag's identity)."""
    if path.is_dir():
        storage = sorted(path.glob("*.mcap")) or []
        kind = "mcap"
        if not storage:
            storage, kind = sorted(path.glob("*.db3")), "sqlite3"
        if not storage:
            raise BagError(f"{path}: no .mcap or .db3 storage file in this directory")
        hashed = sorted(p for p in path.iterdir() if p.is_file())
        return kind, storage, hashed
    if path.suffix in (".mcap", ".db3") and path.is_file():
        return ("mcap" if path.suffix == ".mcap" else "sqlite3"), [path], [path]
    raise BagError(f"{path}: not a rosbag2 bag (a directory with metadata.yaml, or a "
                   ".mcap or .db3 file)")


def bag_identity(path: Path) -> dict:
    """Content hash of the bag: every file (metadata.yaml and storage), by name and bytes."""
    storage, _, hashed = bag_files(path)
    files = []
    for item in hashed:
        digest = hashlib.sha256()
        with open(item, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        files.append({"name": item.name, "size": item.stat().st_size,
                      "sha256": digest.hexdigest()})
    whole = hashlib.sha256("".join(f"{f['sha256']}  {f['name']}\n" for f in files).encode())
    return {"name": path.name, "storage": storage, "sha256": whole.hexdigest(),
            "files": files}


def make_typestore(extra_msg_files: dict[str, Path] | None = None):
    """Kilted's standard types, robot_memory's messages from msg/*.msg, and extra
    definitions (type name -> .msg file) a mapping file names."""
    store = get_typestore(Stores.ROS2_KILTED)
    types = {}
    msg_dir = our_msg_dir()
    if msg_dir is not None:
        for path in sorted(msg_dir.glob("*.msg")):
            types.update(get_types_from_msg(path.read_text(), f"robot_memory/msg/{path.stem}"))
    for name, path in (extra_msg_files or {}).items():
        types.update(get_types_from_msg(path.read_text(), name))
    store.register(types)
    return store


def register_bag_definitions(store, topics: dict[str, Topic]) -> None:
    """Types the store does not know yet, from the definitions the bag carries."""
    types = {}
    for topic in topics.values():
        if topic.msgtype not in store.fielddefs and topic.msgdef:
            try:
                types.update(get_types_from_msg(topic.msgdef, topic.msgtype))
            except Exception as exc:  # rosbags' parser errors vary by cause
                raise BagError(f"topic {topic.name}: cannot parse the definition of "
                               f"{topic.msgtype} embedded in the bag: {exc}") from exc
    if types:
        store.register({k: v for k, v in types.items() if k not in store.fielddefs})


# -- the normal path ----------------------------------------------------------------------
def open_with_rosbags(path: Path) -> tuple[BagContents, Reader]:
    storage, files, _ = bag_files(path)
    reader = Reader(path)
    reader.open()
    contents = BagContents(storage, files)
    for conn in reader.connections:
        definition = conn.msgdef.data if conn.msgdef.format.name == "MSG" else ""
        known = contents.topics.get(conn.topic)
        count = conn.msgcount + (known.listed_count or 0 if known else 0)
        contents.topics[conn.topic] = Topic(conn.topic, conn.msgtype, definition, count)
    return contents, reader


def rosbags_messages(reader: Reader, topics: set[str]) -> Iterator[RawMessage]:
    connections = [c for c in reader.connections if c.topic in topics]
    if not connections:
        return
    for conn, timestamp, data in reader.messages(connections=connections):
        yield RawMessage(conn.topic, conn.msgtype, timestamp, bytes(data))


# -- salvage: MCAP ------------------------------------------------------------------------
def _u16(buf: bytes, at: int) -> tuple[int, int]:
    return struct.unpack_from("<H", buf, at)[0], at + 2


def _u32(buf: bytes, at: int) -> tuple[int, int]:
    return struct.unpack_from("<I", buf, at)[0], at + 4


def _u64(buf: bytes, at: int) -> tuple[int, int]:
    return struct.unpack_from("<Q", buf, at)[0], at + 8


def _string(buf: bytes, at: int) -> tuple[str, int]:
    size, at = _u32(buf, at)
    if at + size > len(buf):
        raise ValueError("string runs past its record")
    return buf[at:at + size].decode("utf-8"), at + size


def _records(buf: bytes, start: int, end: int, where: str, damage: list[str]
             ) -> Iterator[tuple[int, bytes, bool]]:
    """(opcode, content, whole) of each record; a cut record ends the scan with a note
    of the byte offset (a cut chunk is still yielded: its first records may be whole)."""
    at = start
    while at < end:
        if end - at < 9:
            damage.append(f"{where}: truncated at byte {at} (record header cut short)")
            return
        opcode = buf[at]
        size = struct.unpack_from("<Q", buf, at + 1)[0]
        if at + 9 + size > end:
            damage.append(f"{where}: truncated record at byte {at} (opcode 0x{opcode:02x} "
                          f"says {size} bytes, {end - at - 9} left)")
            if opcode == 0x06:
                yield opcode, buf[at + 9:end], False
            return
        yield opcode, buf[at + 9:at + 9 + size], True
        at += 9 + size
        if opcode == 0x02:  # footer: the end of the file
            return


def salvage_mcap(path: Path, contents: BagContents, topics: set[str] | None
                 ) -> Iterator[RawMessage]:
    """Every schema, channel and message record before the damage, chunks included."""
    from rosbags.rosbag2.storage_mcap import decompress
    buf = path.read_bytes()
    if not buf.startswith(MCAP_MAGIC):
        contents.damage.append(f"{path.name}: not an MCAP file (magic bytes missing)")
        return
    schemas: dict[int, tuple[str, str]] = {}
    channels: dict[int, str] = {}

    def scan(data: bytes, start: int, end: int, where: str) -> Iterator[RawMessage]:
        for opcode, rec, whole in _records(data, start, end, where, contents.damage):
            try:
                if opcode == 0x03:  # schema: id, name, encoding, data
                    sid, at = _u16(rec, 0)
                    name, at = _string(rec, at)
                    _, at = _string(rec, at)
                    size, at = _u32(rec, at)
                    schemas[sid] = (name, rec[at:at + size].decode("utf-8", "replace"))
                elif opcode == 0x04:  # channel: id, schema id, topic, encoding, metadata
                    cid, at = _u16(rec, 0)
                    sid, at = _u16(rec, at)
                    topic, at = _string(rec, at)
                    channels[cid] = topic
                    name, definition = schemas.get(sid, ("", ""))
                    if topic not in contents.topics:
                        contents.topics[topic] = Topic(topic, name, definition, None)
                elif opcode == 0x05:  # message: channel, sequence, log time, publish time
                    cid, at = _u16(rec, 0)
                    log_time, _ = _u64(rec, at + 4)
                    topic = channels.get(cid)
                    if topic is None:
                        contents.damage.append(f"{where}: message on unknown channel {cid}")
                        continue
                    if topics is None or topic in topics:
                        yield RawMessage(topic, contents.topics[topic].msgtype, log_time,
                                         rec[22:])
                elif opcode == 0x06:  # chunk: times, size, crc, compression, records
                    uncompressed, at = _u64(rec, 16)
                    crc, at = _u32(rec, at)
                    compression, at = _string(rec, at)
                    size, at = _u64(rec, at)
                    if whole:
                        inner = decompress(rec[at:at + size], compression, uncompressed, crc)
                    else:
                        inner = _partial_chunk(rec[at:], compression)
                    yield from scan(inner, 0, len(inner), f"{where} (chunk)")
            except Exception as exc:  # a damaged record: note it, keep scanning
                contents.damage.append(f"{where}: unreadable record (opcode 0x{opcode:02x}): "
                                       f"{exc}")

    at = len(MCAP_MAGIC)
    yield from scan(buf, at, len(buf), path.name)


def _partial_chunk(data: bytes, compression: str) -> bytes:
    """What a cut chunk still holds: its bytes, or as much as zstd can decode."""
    if compression == "":
        return data
    if compression == "zstd":
        try:
            from compression import zstd
        except ImportError:
            from backports import zstd
        return zstd.ZstdDecompressor().decompress(data)
    raise ValueError(f"cut chunk compressed with {compression!r}: cannot be read in part")


# -- salvage: SQLite3 ---------------------------------------------------------------------
def salvage_sqlite3(path: Path, contents: BagContents, topics: set[str] | None
                    ) -> Iterator[RawMessage]:
    """Rows of the messages table in id order; an unreadable stretch is skipped over
    (probing further ids) and reported."""
    uri = f"file:{path}?mode=ro&immutable=1"
    try:
        db = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        contents.damage.append(f"{path.name}: cannot open: {exc}")
        return
    try:
        # A cut file is shorter than its header says; SQLite then refuses every read
        # unless the schema is "writable" (read-only still: mode=ro).
        db.execute("PRAGMA writable_schema=ON")
        try:
            rows = db.execute("SELECT id, name, type FROM topics").fetchall()
            definitions = {}
            try:
                definitions = dict(db.execute(
                    "SELECT topic_type, encoded_message_definition FROM message_definitions "
                    "WHERE encoding = 'ros2msg'").fetchall())
            except sqlite3.Error:
                pass  # bags before Iron carry no definitions
        except sqlite3.Error as exc:
            contents.damage.append(f"{path.name}: topics table unreadable: {exc}")
            return
        by_id = {}
        for topic_id, name, msgtype in rows:
            by_id[topic_id] = name
            if name not in contents.topics:
                contents.topics[name] = Topic(name, msgtype, definitions.get(msgtype, ""), None)
        after = 0
        while True:  # stream rows: those before a damaged page are kept
            try:
                for row_id, topic_id, timestamp, data in db.execute(
                        "SELECT id, topic_id, timestamp, data FROM messages WHERE id > ? "
                        "ORDER BY id", (after,)):
                    after = row_id
                    topic = by_id.get(topic_id)
                    if topic is None:
                        contents.damage.append(f"{path.name}: message {row_id} on unknown "
                                               f"topic id {topic_id}")
                    elif topics is None or topic in topics:
                        yield RawMessage(topic, contents.topics[topic].msgtype, int(timestamp),
                                         bytes(data))
                return
            except sqlite3.DatabaseError as exc:
                resume = _next_readable_id(db, after)
                if resume is None:
                    contents.damage.append(f"{path.name}: messages after id {after} "
                                           f"unreadable: {exc}")
                    return
                contents.damage.append(f"{path.name}: messages {after + 1}..{resume - 1} "
                                       f"unreadable: {exc}")
                after = resume - 1
    finally:
        db.close()


def _next_readable_id(db: sqlite3.Connection, after: int) -> int | None:
    """The first id past a damaged stretch, probing ever further (up to ~10^6 ids)."""
    for step in (2 ** k for k in range(21)):
        try:
            row = db.execute("SELECT id FROM messages WHERE id > ? ORDER BY id LIMIT 1",
                             (after + step,)).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row is None:
            return None
        try:
            db.execute("SELECT id, topic_id, timestamp, data FROM messages WHERE id = ?",
                       (row[0],)).fetchone()
            return row[0]
        except sqlite3.DatabaseError:
            continue
    return None


def salvage(path: Path, topics: set[str] | None) -> tuple[BagContents, Iterator[RawMessage]]:
    storage, files, _ = bag_files(path)
    contents = BagContents(storage, files)
    reader = salvage_mcap if storage == "mcap" else salvage_sqlite3

    def messages() -> Iterator[RawMessage]:
        for item in files:
            yield from reader(item, contents, topics)
    return contents, messages()

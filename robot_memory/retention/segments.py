"""Sealed archive segments: the events a compaction removed from the live store, in a
file of their own (JSON lines), whose SHA-256 the chain's `compaction` event records.

Line 1 is the header (format, identity, range, the hash before the range); then one event
per line, oldest first, as stored: [id, seq, kind, stamp_ns, prev_hash, event_hash,
payload_json]; the last line is the trailer (events, the hash at the cut). The payload is
kept as its stored text, so the chain's hashes re-compute from the file alone.

Two formats, told apart by the file name and held to the header's tag:
- `robot_memory.segment/2` (`*.segment.jsonl.zst`, what compactions write): those lines
  compressed as one zstd frame (the `zstandard` package; zstd is what MCAP and most log
  tools use, and the lines, two hex hashes each, compress well), with zstd's content
  checksum. Written and read as a stream, so memory stays flat whatever the segment's
  size. The SHA-256 the chain records is of the file's bytes as stored (compressed): a
  segment is checked against its compaction from the file alone, before it is opened.
- `robot_memory.segment/1` (`*.segment.jsonl`, written before compression): the same
  lines, uncompressed. Still read and verified; written only when asked for
  (`compressed=False`).
A compressed segment that is truncated, corrupted or followed by other bytes is a
SegmentError naming the file and what is wrong, never a zstd exception.

A segment is written to a temporary file beside its final name, synced, then renamed:
a crash or a full disk leaves no partial segment under a name a compaction could cite.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import zstandard

from robot_memory.errors import StoreIntegrityError

FORMAT = "robot_memory.segment/2"  # compressed: what compactions write
FORMAT_PLAIN = "robot_memory.segment/1"  # uncompressed: written before compression
SUFFIX = ".segment.jsonl.zst"
SUFFIX_PLAIN = ".segment.jsonl"
READ_CHUNK = 1 << 20
# Compressed bytes fed to the decompressor at a time: what it returns for one feed is
# held in memory at once, so the feed stays small.
DECOMPRESS_CHUNK = 1 << 16
# zstd's level: a middle one, compressing a compaction's range about as fast as the
# store reads it.
LEVEL = 10


class SegmentError(StoreIntegrityError):
    """A segment that cannot be written or read, with the file and what is wrong."""


@dataclass(frozen=True)
class SegmentRow:
    id: int
    seq: int
    kind: str
    stamp_ns: int
    prev_hash: str
    event_hash: str
    payload_json: str


def segment_name(identity_hash: str, from_seq: int, until_seq: int,
                 compressed: bool = True) -> str:
    return (f"{identity_hash[:16]}-{from_seq:012d}-{until_seq:012d}"
            + (SUFFIX if compressed else SUFFIX_PLAIN))


def is_segment_file(name: str) -> bool:
    """Whether a file name is a segment's, of either format."""
    return name.endswith((SUFFIX, SUFFIX_PLAIN))


def write_segment(path: Path, header: dict, rows: Iterable[SegmentRow],
                  trailer: Callable[[], dict], compressed: bool = True) -> str:
    """Write the segment at `path` (atomically, synced), compressed unless asked not to
    (the format follows: FORMAT, or FORMAT_PLAIN); the SHA-256 of the file's bytes.
    `trailer` is asked for the last line once the rows are written. SegmentError when it
    cannot be written (the disk is full, the directory is not writable): nothing is left
    under `path`."""
    partial = path.with_name(path.name + ".partial")
    count = 0
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(partial, "wb") as raw:
            hashed = _HashingWriter(raw)
            out = zstandard.ZstdCompressor(level=LEVEL, write_checksum=True).stream_writer(
                hashed, closefd=False) if compressed else hashed

            def put(line: str) -> None:
                out.write(line.encode("utf-8") + b"\n")
            put(json.dumps({"format": FORMAT if compressed else FORMAT_PLAIN, **header},
                           sort_keys=True))
            for row in rows:
                put(json.dumps([row.id, row.seq, row.kind, row.stamp_ns, row.prev_hash,
                                row.event_hash, row.payload_json], ensure_ascii=False))
                count += 1
            put(json.dumps({"end": {"events": count, **trailer()}}, sort_keys=True))
            if compressed:
                out.close()  # ends the frame (its checksum) into `hashed`
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(partial, path)
        sync_directory(path.parent)
    except (OSError, zstandard.ZstdError) as exc:
        try:
            partial.unlink(missing_ok=True)
        except OSError:  # there was no file to begin with
            pass
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise SegmentError(f"cannot write segment {path}: {why}") from None
    return hashed.digest.hexdigest()


class _HashingWriter:
    """The file under the compressor: what reaches the disk is what is hashed."""

    def __init__(self, raw):
        self.raw = raw
        self.digest = hashlib.sha256()

    def write(self, data) -> int:
        self.digest.update(data)
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()


def sync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable: sync the folder's entry."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def read_segment(path: Path) -> tuple[dict, Iterator[SegmentRow], dict]:
    """(header, rows, trailer) of a segment of either format (by its name), whose hash
    has been checked; SegmentError naming the file and the line, or what is wrong with
    its compression. The rows are read as iterated; the trailer dict is filled once they
    all have been."""
    path = Path(path)
    compressed = path.name.endswith(SUFFIX)
    expected = FORMAT if compressed else FORMAT_PLAIN
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise SegmentError(f"cannot read segment {path}: {exc.strerror or exc}") from None
    lines = _lines(path, f, compressed)
    first = next(lines, None)
    header = _parse(path, 1, first) if first is not None else None
    if not isinstance(header, dict) or header.get("format") != expected:
        lines.close()
        raise SegmentError(f"{path}: line 1 is not a {expected} header")
    trailer: dict = {}

    def rows() -> Iterator[SegmentRow]:
        with closing(lines):
            for number, line in enumerate(lines, start=2):
                value = _parse(path, number, line)
                if isinstance(value, dict) and "end" in value:
                    trailer.update(value["end"])
                    if next(lines, None) is not None:
                        raise SegmentError(f"{path}: line {number + 1} follows the trailer")
                    return
                try:
                    yield SegmentRow(*value)
                except TypeError:
                    raise SegmentError(f"{path}: line {number} is not an event") from None
            raise SegmentError(f"{path}: no trailer (truncated)")
    return header, rows(), trailer


def _lines(path: Path, f, compressed: bool) -> Iterator[bytes]:
    """The file's lines (bytes, newline included), decompressed as they are read; the
    file is closed when they end or the iterator is closed."""
    with f:
        if not compressed:
            yield from f
            return
        decompressor = zstandard.ZstdDecompressor().decompressobj()
        pending = b""
        try:
            while chunk := f.read(DECOMPRESS_CHUNK):
                if decompressor.eof:
                    raise SegmentError(f"{path}: bytes follow the end of its zstd frame")
                pending += decompressor.decompress(chunk)
                *whole, pending = pending.split(b"\n")
                for line in whole:
                    yield line + b"\n"
        except zstandard.ZstdError as exc:
            raise SegmentError(f"{path}: not a whole zstd frame ({exc})") from None
        except OSError as exc:
            raise SegmentError(f"cannot read segment {path}: {exc.strerror or exc}") from None
        if not decompressor.eof:
            raise SegmentError(f"{path}: its zstd frame ends early (truncated)")
        if decompressor.unused_data:
            raise SegmentError(f"{path}: bytes follow the end of its zstd frame")
        if pending:
            yield pending


def _parse(path: Path, number: int, line: bytes):
    try:
        return json.loads(line.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError included
        raise SegmentError(f"{path}: line {number} does not parse") from None


__all__ = ["FORMAT", "FORMAT_PLAIN", "SUFFIX", "SUFFIX_PLAIN", "SegmentError", "SegmentRow",
           "file_sha256", "is_segment_file", "read_segment", "segment_name", "sync_directory",
           "write_segment"]

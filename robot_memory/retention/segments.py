"""Sealed archive segments: the events a compaction removed from the live store, in a
file of their own (JSON lines), whose SHA-256 the chain's `compaction` event records.

Line 1 is the header (format, identity, range, the hash before the range); then one event
per line, oldest first, as stored: [id, seq, kind, stamp_ns, prev_hash, event_hash,
payload_json]; the last line is the trailer (events, the hash at the cut). The payload is
kept as its stored text, so the chain's hashes re-compute from the file alone.

A segment is written to a temporary file beside its final name, synced, then renamed:
a crash or a full disk leaves no partial segment under a name a compaction could cite.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from robot_memory.errors import StoreIntegrityError

FORMAT = "robot_memory.segment/1"
READ_CHUNK = 1 << 20


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


def segment_name(identity_hash: str, from_seq: int, until_seq: int) -> str:
    return f"{identity_hash[:16]}-{from_seq:012d}-{until_seq:012d}.segment.jsonl"


def write_segment(path: Path, header: dict, rows: Iterable[SegmentRow],
                  trailer: Callable[[], dict]) -> str:
    """Write the segment at `path` (atomically, synced); its SHA-256. `trailer` is asked
    for the last line once the rows are written. SegmentError when it
    cannot be written (the disk is full, the directory is not writable): nothing is left
    under `path`."""
    partial = path.with_name(path.name + ".partial")
    digest, count = hashlib.sha256(), 0
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(partial, "wb") as out:
            def put(line: str) -> None:
                data = line.encode("utf-8") + b"\n"
                digest.update(data)
                out.write(data)
            put(json.dumps({"format": FORMAT, **header}, sort_keys=True))
            for row in rows:
                put(json.dumps([row.id, row.seq, row.kind, row.stamp_ns, row.prev_hash,
                                row.event_hash, row.payload_json], ensure_ascii=False))
                count += 1
            put(json.dumps({"end": {"events": count, **trailer()}}, sort_keys=True))
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)
        _sync_directory(path.parent)
    except OSError as exc:
        try:
            partial.unlink(missing_ok=True)
        except OSError:  # there was no file to begin with
            pass
        raise SegmentError(f"cannot write segment {path}: {exc.strerror or exc}") from None
    return digest.hexdigest()


def _sync_directory(directory: Path) -> None:
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
    """(header, rows, trailer) of a segment whose hash has been checked; SegmentError
    naming the line when it does not parse. The rows are read as iterated; the trailer
    dict is filled once they all have been."""
    try:
        f = open(path, encoding="utf-8")
    except OSError as exc:
        raise SegmentError(f"cannot read segment {path}: {exc.strerror or exc}") from None
    header = _parse(path, 1, f.readline())
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        f.close()
        raise SegmentError(f"{path}: line 1 is not a {FORMAT} header")
    trailer: dict = {}

    def rows() -> Iterator[SegmentRow]:
        with f:
            for number, line in enumerate(f, start=2):
                value = _parse(path, number, line)
                if isinstance(value, dict) and "end" in value:
                    trailer.update(value["end"])
                    return
                try:
                    yield SegmentRow(*value)
                except TypeError:
                    raise SegmentError(f"{path}: line {number} is not an event") from None
            raise SegmentError(f"{path}: no trailer (truncated)")
    return header, rows(), trailer


def _parse(path: Path, number: int, line: str):
    try:
        return json.loads(line)
    except ValueError:
        raise SegmentError(f"{path}: line {number} does not parse") from None


__all__ = ["FORMAT", "SegmentError", "SegmentRow", "file_sha256", "read_segment",
           "segment_name", "write_segment"]

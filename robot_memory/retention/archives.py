"""The history compactions moved out of the live store, read back: each segment checked
against its compaction event (`verify_archives`), the events of any kinds across the
segments and the live chain (`history_events`), the whole chain rebuilt in a scratch
store (`whole_history`, for replay), and the robot's deliberate forgetting of a segment
(`forget_segment`, on the record). Writing segments is robot_memory/retention/compaction.py's."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select

from robot_memory.canonical import plain_json_loads
from robot_memory.retention.compaction import READ_BATCH, CompactionError
from robot_memory.event_kinds import SEGMENT_FORGOTTEN
from robot_memory.retention.segments import SegmentError, file_sha256, read_segment
from robot_memory.store import (Compaction, NewEvent, Partition, StoredEvent, compactions,
                                stored_digest)
from robot_memory.store.schema import events


@dataclass
class ArchiveReport:
    identity_hash: str
    ok: bool
    segments: int = 0
    events_checked: int = 0
    forgotten: int = 0  # segments deleted on purpose (forget_segment), not checked
    problem: str = ""

    def describe(self) -> str:
        if self.ok:
            forgotten = f"; {self.forgotten} forgotten on purpose" if self.forgotten else ""
            return (f"identity {self.identity_hash[:12]}: {self.segments} archive segment(s) "
                    f"intact ({self.events_checked} events re-hashed{forgotten})")
        return f"identity {self.identity_hash[:12]}: archives: {self.problem}"


def verify_archives(partition: Partition, archive_dir: Path) -> ArchiveReport:
    """Re-hash the history the compactions removed, segment by segment, against what
    each compaction event recorded. A segment deleted on purpose (forget_segment, logged)
    is skipped; any other that is missing is a problem."""
    ident = partition.identity_hash
    with partition.store.read() as conn:
        found = compactions(ident, conn)
        forgotten = {e.payload.get("segment") for e in partition.events(
            kinds=[SEGMENT_FORGOTTEN], conn=conn)}
        live_kept = {}
        for c in found:
            for seq, event_hash in conn.execute(select(events.c.seq, events.c.event_hash).where(
                    events.c.identity_hash == ident, events.c.seq >= c.from_seq,
                    events.c.seq <= c.until_seq)).all():
                live_kept[seq] = event_hash
    report = ArchiveReport(ident, True)
    for c in found:
        path = archive_dir / c.segment
        where = f"segment {c.segment} (seq {c.from_seq}..{c.until_seq}, compaction event " \
                f"seq {c.seq})"
        # Forgotten here, but maybe still held elsewhere: a segment the disk budget
        # forgot once it was shipped is checked when its fleet copy is put back beside
        # the others (verify --fleet gathers it); only one that is not there is skipped.
        if c.segment in forgotten and not path.exists():
            report.forgotten += 1
            continue
        if not path.exists():
            return _bad(report, f"{where} is missing from {archive_dir}")
        if file_sha256(path) != c.segment_sha256:
            return _bad(report, f"{where}: its SHA-256 differs from the one the compaction "
                                "recorded (edited, truncated, reordered or another file)")
        problem = _rehash_segment(path, c, ident, live_kept, report)
        if problem:
            return _bad(report, f"{where}: {problem}")
        report.segments += 1
    return report


def forget_segment(partition: Partition, archive_dir: Path, segment: str, operator: str,
                   reason: str, stamp_ns: int | None = None) -> Compaction:
    """The robot's own forgetting, on purpose and on the record: log a segment_forgotten
    event naming the segment and its hash, then delete the file. Facts do not change
    (they never read segments); the history before it can no longer be re-hashed."""
    with partition.store.read() as conn:
        named = [c for c in compactions(partition.identity_hash, conn) if c.segment == segment]
    if not named:
        raise CompactionError(f"no compaction of identity {partition.identity_hash[:12]} "
                              f"wrote a segment named {segment}")
    c = named[0]
    partition.append(SEGMENT_FORGOTTEN, {"segment": segment, "segment_sha256": c.segment_sha256,
                                         "from_seq": c.from_seq, "until_seq": c.until_seq,
                                         "operator": operator, "reason": reason},
                     stamp_ns if stamp_ns is not None else time.time_ns())
    (archive_dir / segment).unlink(missing_ok=True)
    return c


def _rehash_segment(path: Path, c: Compaction, ident: str, live_kept: dict,
                    report: ArchiveReport) -> str:
    try:
        header, rows, trailer = read_segment(path)
        if (header.get("identity_hash"), header.get("from_seq"), header.get("until_seq")) != \
                (ident, c.from_seq, c.until_seq):
            return "its header names another identity or range"
        prev, expected = c.prev_hash, c.from_seq
        for row in rows:
            if row.seq != expected:
                return f"seq {expected} missing (next is {row.seq})"
            if row.prev_hash != prev:
                return f"seq {row.seq}: prev_hash does not link to the event before it"
            if stored_digest(row.prev_hash, ident, row.seq, row.kind, row.stamp_ns,
                             row.payload_json) != row.event_hash:
                return f"seq {row.seq} (events.id {row.id}): event_hash does not match its content"
            if row.seq in live_kept and live_kept[row.seq] != row.event_hash:
                return f"seq {row.seq}: differs from the copy kept live"
            prev, expected = row.event_hash, expected + 1
            report.events_checked += 1
    except SegmentError as exc:
        return str(exc)
    if expected != c.until_seq + 1 or prev != c.cut_hash:
        return f"ends at seq {expected - 1} with a hash other than the cut's"
    return ""


def _bad(report: ArchiveReport, problem: str) -> ArchiveReport:
    report.ok, report.problem = False, problem
    return report


def whole_history(partition: Partition, archive_dir: Path, url: str,
                  until_seq: int | None = None) -> Partition:
    """The identity's chain up to `until_seq` (default: the head) rebuilt in a scratch
    store at `url` from the segments and the live rows: the same events re-appended in
    order give the same chain, hash for hash (checked at the end). What replay and
    explain read when the events they need were compacted. CompactionError naming the
    segment that is missing, or that does not re-hash."""
    from robot_memory.store import MemoryStore
    ident = partition.identity_hash
    with partition.store.read() as conn:
        found = compactions(ident, conn)
        head_seq, head_hash = partition.head(conn)
    last = head_seq if until_seq is None else min(until_seq, head_seq)
    rebuilt = MemoryStore(url).partition(ident)
    batch: list[NewEvent] = []

    def add(kind: str, payload_json: str, stamp_ns: int) -> None:
        batch.append(NewEvent(kind, plain_json_loads(payload_json), stamp_ns))
        if len(batch) >= READ_BATCH:
            rebuilt.append_many(batch)
            batch.clear()
    for c in found:
        if c.from_seq > last:
            break
        for row in _segment_rows(archive_dir, c, f"the events up to seq {last}"):
            if row.seq > last:
                break
            add(row.kind, row.payload_json, row.stamp_ns)
    after = found[-1].until_seq if found else 0
    if last > after:
        for event_id, seq, kind, stamp_ns, payload_json in _live_rows(partition, after, last):
            add(kind, payload_json, stamp_ns)
    rebuilt.append_many(batch)
    with partition.store.read() as conn:
        expected = conn.execute(select(events.c.event_hash).where(
            events.c.identity_hash == ident, events.c.seq == last)).scalar()
    rebuilt_seq, rebuilt_hash = rebuilt.head()
    if rebuilt_seq != last or (expected is not None and rebuilt_hash != expected):
        raise CompactionError(f"the history rebuilt from the segments does not reach the "
                              f"live chain at seq {last}")
    return rebuilt


def _segment_rows(archive_dir: Path, c, needed_by: str):
    """The rows of compaction `c`'s segment, once its file is there and matches the
    compaction; else CompactionError naming the segment and what needs it."""
    path = archive_dir / c.segment
    if not path.exists() or file_sha256(path) != c.segment_sha256:
        raise CompactionError(f"{needed_by} need segment {c.segment} "
                              f"(seq {c.from_seq}..{c.until_seq}) in {archive_dir}: "
                              + ("missing" if not path.exists()
                                 else "it does not match its compaction"))
    return read_segment(path)[1]


def history_events(partition: Partition, archive_dir: Path, kinds: Iterable[str],
                   after_seq: int = 0) -> Iterator[StoredEvent]:
    """Events of these kinds after `after_seq`, in chain order, across the compactions:
    from their segments (whole ranges, kept events included), then from the live chain
    after the newest cut. CompactionError naming a segment that is needed but missing or
    does not match its compaction."""
    kinds = frozenset(kinds)
    with partition.store.read() as conn:
        found = compactions(partition.identity_hash, conn)
    for c in found:
        if c.until_seq <= after_seq:
            continue
        for row in _segment_rows(archive_dir, c, f"events after seq {after_seq}"):
            if row.seq > after_seq and row.kind in kinds:
                yield StoredEvent(row.id, row.seq, row.kind, row.stamp_ns,
                                  plain_json_loads(row.payload_json), row.prev_hash,
                                  row.event_hash)
    cut = found[-1].until_seq if found else 0
    yield from partition.events(kinds, after_seq=max(after_seq, cut))


def archived_segments(partition: Partition, archive_dir: Path | None) -> list[dict]:
    """The segments compactions wrote, oldest first, each with whether it is present in
    `archive_dir` (False when no directory is given): what a reader of the whole history
    needs, named."""
    with partition.store.read() as conn:
        found = compactions(partition.identity_hash, conn)
    return [{"segment": c.segment, "from_seq": c.from_seq, "until_seq": c.until_seq,
             "first_event_id": c.first_event_id, "last_event_id": c.last_event_id,
             "present": archive_dir is not None and (archive_dir / c.segment).exists()}
            for c in found]


def archived_seq(partition: Partition, archive_dir: Path, event_id: int) -> int | None:
    """The chain position of a compacted event, read from its segment (None: no
    compaction removed it). CompactionError naming the segment when it is not there or
    does not match its compaction."""
    c = segment_holding(partition, event_id)
    if c is None:
        return None
    for row in _segment_rows(archive_dir, c, f"event {event_id}"):
        if row.id == event_id:
            return row.seq
    return None


def _live_rows(partition: Partition, after_seq: int, until_seq: int):
    with partition.store.read() as conn:
        yield from conn.execute(select(events.c.id, events.c.seq, events.c.kind,
                                       events.c.stamp_ns, events.c.payload_json).where(
            events.c.identity_hash == partition.identity_hash, events.c.seq > after_seq,
            events.c.seq <= until_seq).order_by(events.c.seq)).all()


def segment_holding(partition: Partition, event_id: int) -> Compaction | None:
    """The compaction whose segment holds this (removed) event, if any."""
    with partition.store.read() as conn:
        for c in compactions(partition.identity_hash, conn):
            if c.first_event_id <= event_id <= c.last_event_id:
                return c
    return None


__all__ = ["ArchiveReport", "archived_segments", "archived_seq", "forget_segment",
           "history_events", "segment_holding", "verify_archives", "whole_history"]

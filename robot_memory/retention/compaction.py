"""Compaction: a closed, consolidated range of one identity's chain moves from the live
store into a sealed segment file, so the live store stays bounded for the robot's life.

Safe because a consolidation pass is invariant to how the events are cut into passes:
the facts of (the states at the cut + the events after it) are the facts of the whole
history. So only events the consolidator has already folded are compacted (at most its
checkpoint's `last_seq`), and the states stay live.

What never leaves the live store (`stays_live`):
- every event that is not a result, a consultation audit, a privacy refusal or an older
  consolidation run: overrides (the pass re-reads them, and they name the facts a human
  corrected), conflicts (what a contested fact points at), identity checks, imports,
  migrations, earlier compactions and forgotten segments;
- results that failed for a safety-relevant reason (SAFETY_FAILURE_REASONS, the rules' default):
  catastrophic outcomes persist.

Order of work, each step safe to interrupt: the segment is written and synced under its
final name; then one transaction appends the `compaction` event and removes the range
(store/compacted.py). A crash before the commit leaves the store as it was (and a segment
no event names, which the next compaction of that range overwrites); after it, the new
state. A full disk fails the first step, before the store is touched.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select

from robot_memory.canonical import plain_json_loads
from robot_memory.errors import StoreFailure
from robot_memory.event_kinds import (COMPACTION, CONSOLIDATION_RUN, EXECUTION_RESULT,
                                      FACT_CONSULTATION, PRIVACY_REJECTION)
from robot_memory.execution_result import SAFETY_FAILURE_REASONS
from robot_memory.retention.segments import SegmentError, SegmentRow, segment_name, write_segment
from robot_memory.store import (GENESIS_HASH, Compaction, NewEvent, Partition, compactions,
                                kept_digest, remove_range)
from robot_memory.store.checkpoint import read_checkpoint
from robot_memory.store.schema import events

COMPACTABLE_KINDS = frozenset({EXECUTION_RESULT, FACT_CONSULTATION, PRIVACY_REJECTION,
                               CONSOLIDATION_RUN})
READ_BATCH = 5000


class CompactionError(StoreFailure):
    """A compaction that could not be done (the live store is as it was), or history
    that needs a segment that is not there."""


@dataclass
class CompactionReport:
    identity_hash: str
    compaction: Compaction | None = None  # None: nothing to compact
    segment_path: Path | None = None
    seconds: float = 0.0
    why_nothing: str = ""

    def describe(self) -> str:
        c = self.compaction
        if c is None:
            return f"identity {self.identity_hash[:12]}: nothing compacted ({self.why_nothing})"
        return (f"identity {self.identity_hash[:12]}: compacted seq {c.from_seq}..{c.until_seq} "
                f"into {self.segment_path} ({c.removed} events removed from the live store, "
                f"{c.kept} kept live; compaction event seq {c.seq}) in {self.seconds:.2f} s")


def default_archive_dir(url: str) -> Path:
    """Segments go beside a SQLite database (`memory.db` -> `memory.db.segments/`); a
    server database has no side, so the ROS home directory holds them."""
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        db = Path(url.removeprefix("sqlite:///"))
        return db.parent / (db.name + ".segments")
    return Path(os.environ.get("ROS_HOME", Path.home() / ".ros")) / "robot_memory_segments"


def stays_live(kind: str, payload_json: str, safety_reasons: frozenset[str]) -> bool:
    if kind not in COMPACTABLE_KINDS:
        return True
    if kind != EXECUTION_RESULT:
        return False
    payload = plain_json_loads(payload_json)
    return isinstance(payload, dict) and payload.get("success") is False and \
        (payload.get("failure_reason") or "unspecified") in safety_reasons


def compactable_until(partition: Partition) -> int:
    """The newest chain position a compaction may reach: what consolidation has folded."""
    with partition.store.read() as conn:
        return read_checkpoint(partition, conn).done_seq


# A store that grew before retention (or with it off) sheds its history in steps of at
# most this many times compact_every_events, one per pass: a compaction is one
# transaction, and the consolidator does nothing else while it runs.
STEPS_PER_COMPACTION = 10


def retention_due(partition: Partition, retain: int, every: int) -> int | None:
    """The retention policy: the chain position to compact up to so that the newest
    `retain` positions stay live, once at least `every` positions wait (None: not yet),
    at most STEPS_PER_COMPACTION x `every` positions at a time."""
    with partition.store.read() as conn:
        found = compactions(partition.identity_hash, conn)
        head = partition.head(conn)[0]
        done = read_checkpoint(partition, conn).done_seq
    compacted = found[-1].until_seq if found else 0
    until = min(head - retain, done, compacted + STEPS_PER_COMPACTION * every)
    return until if until - compacted >= every else None


def seq_before(partition: Partition, *, event_id: int | None = None,
               stamp_ns: int | None = None) -> int:
    """The chain position just before an event id, or before the first event stamped at
    or after `stamp_ns` (the last position, when none is)."""
    ident = partition.identity_hash
    with partition.store.read() as conn:
        if event_id is not None:
            seq = conn.execute(select(events.c.seq).where(
                events.c.identity_hash == ident, events.c.id >= event_id)
                .order_by(events.c.id).limit(1)).scalar()
        else:
            seq = conn.execute(select(events.c.seq).where(
                events.c.identity_hash == ident, events.c.stamp_ns >= stamp_ns)
                .order_by(events.c.seq).limit(1)).scalar()
        if seq is None:
            return partition.head(conn)[0]
    return seq - 1


def compact(partition: Partition, until_seq: int, archive_dir: Path, *,
            stamp_ns: int | None = None,
            safety_reasons: frozenset[str] = frozenset(SAFETY_FAILURE_REASONS),
            compressed: bool = True) -> CompactionReport:
    """Compact the identity's chain from the end of the last compaction up to `until_seq`
    (lowered to what consolidation has folded) into a segment in `archive_dir`:
    compressed, unless `compressed` is False (the format written before compression,
    kept for stores and tools that expect it; retention/segments.py)."""
    started = time.monotonic()
    report = CompactionReport(partition.identity_hash)
    ident = partition.identity_hash
    with partition.store.read() as conn:
        found = compactions(ident, conn)
        done = read_checkpoint(partition, conn).done_seq
        from_seq = found[-1].until_seq + 1 if found else 1
        prev_hash = found[-1].cut_hash if found else GENESIS_HASH
        until_seq = min(until_seq, done)
        if until_seq < from_seq:
            report.why_nothing = (f"nothing consolidated past seq {from_seq - 1} before the "
                                  f"limit (consolidated up to {done})")
            return report
        states = hashlib.sha256()
        for kind, key, state_json in partition.all_consolidation_states(conn):
            states.update(f"{kind}\x1f{key}\x1f{state_json}\n".encode("utf-8"))
        scan = _RangeScan(partition, conn, from_seq, until_seq, safety_reasons)
        name = segment_name(ident, from_seq, until_seq, compressed)
        path = archive_dir / name
        header = {"identity_hash": ident, "from_seq": from_seq, "until_seq": until_seq,
                  "prev_hash": prev_hash}
        try:
            sha = write_segment(path, header, scan.rows(), lambda: {"cut_hash": scan.cut_hash},
                                compressed)
        except SegmentError as exc:
            raise CompactionError(f"{exc}; the live store is untouched") from None
    if scan.count != until_seq - from_seq + 1:
        path.unlink(missing_ok=True)
        raise CompactionError(f"seq {from_seq}..{until_seq}: {scan.count} events present "
                              "in the live store; verify the store first")
    claims = Compaction(0, 0, from_seq, until_seq, prev_hash, scan.cut_hash,
                        scan.first_id, scan.last_id, scan.removed, len(scan.kept),
                        kept_digest(scan.kept), name, sha, states.hexdigest())
    with partition.store.write() as conn:
        latest = compactions(ident, conn)
        if (latest[-1].until_seq if latest else 0) != from_seq - 1:
            raise CompactionError("another compaction of this identity ran meanwhile")
        stamp = stamp_ns if stamp_ns is not None else time.time_ns()
        event = partition.append_in(conn, [NewEvent(COMPACTION, claims.payload(), stamp)])[0]
        remove_range(conn, ident, partition.chain_number(conn), from_seq, until_seq,
                     scan.first_id, scan.last_id,
                     scan.kept_ids, partition.store.rollup.block)
    report.compaction = Compaction.of_payload(event.seq, event.id, claims.payload())
    report.segment_path = path
    report.seconds = time.monotonic() - started
    return report


@dataclass
class _RangeScan:
    """The range's live rows, read once in chain order while the segment is written."""

    partition: Partition
    conn: object
    from_seq: int
    until_seq: int
    safety_reasons: frozenset[str]
    count: int = 0
    first_id: int = 0
    last_id: int = 0
    cut_hash: str = ""
    removed: int = 0
    kept: list[tuple[int, str]] = field(default_factory=list)  # (seq, event hash)
    kept_ids: list[tuple[int, int]] = field(default_factory=list)  # (seq, event id)

    def rows(self) -> Iterator[SegmentRow]:
        ident, cursor = self.partition.identity_hash, self.from_seq - 1
        while True:
            batch = self.conn.execute(select(
                events.c.id, events.c.seq, events.c.kind, events.c.stamp_ns,
                events.c.prev_hash, events.c.event_hash, events.c.payload_json).where(
                events.c.identity_hash == ident, events.c.seq > cursor,
                events.c.seq <= self.until_seq).order_by(events.c.seq)
                .limit(READ_BATCH)).all()
            for row in batch:
                event = SegmentRow(*row)
                self.count += 1
                self.first_id = self.first_id or event.id
                self.last_id, self.cut_hash = event.id, event.event_hash
                if stays_live(event.kind, event.payload_json, self.safety_reasons):
                    self.kept.append((event.seq, event.event_hash))
                    self.kept_ids.append((event.seq, event.id))
                else:
                    self.removed += 1
                yield event
            if len(batch) < READ_BATCH:
                return
            cursor = batch[-1][1]


__all__ = ["COMPACTABLE_KINDS", "STEPS_PER_COMPACTION", "CompactionError", "CompactionReport",
           "compact", "compactable_until", "default_archive_dir", "retention_due", "seq_before",
           "stays_live"]

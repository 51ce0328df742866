"""Shipping sealed segments to the fleet store, with a receipt in the robot's own log.

For each segment a compaction of the identity wrote that has no receipt yet, oldest
first: upload it (robot_memory/retention/destinations.py), have the destination
re-compute the SHA-256 of what it stored, which must equal the one the chain's
compaction event recorded, and only then append a `segment_shipped` event (the
receipt: segment, sha256, destination without its password, bytes). A segment whose
receipt matches its compaction's hash is what the disk budget may remove first; one
without is never taken for shipped, whatever the destination holds.

A failure stops the round and is retried after a backoff that doubles per failed round
up to a cap, with jitter from a seeded generator (robots of a fleet coming back
together do not retry in step). The receipts are the state: after a restart the next
round starts from what they do not cover, and a segment stored before a crash but not
yet receipted is confirmed, not uploaded again.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from robot_memory.event_kinds import SEGMENT_FORGOTTEN, SEGMENT_SHIPPED
from robot_memory.retention.destinations import SegmentDestination, ShippingError, error_text
from robot_memory.retention.segments import file_sha256
from robot_memory.store import Compaction, Partition, compactions

# The first retry waits this long; each failed round doubles it, up to the cap.
FIRST_BACKOFF_S = 1.0


@dataclass(frozen=True)
class Receipt:
    """A `segment_shipped` event: where the segment went and the hash confirmed there."""

    seq: int
    segment: str
    sha256: str
    destination: str
    size_bytes: int


def receipts(partition: Partition, conn=None) -> dict[str, Receipt]:
    """The identity's receipts by segment name (the newest, when a segment went to more
    than one place)."""
    found = {}
    for event in partition.events(kinds=[SEGMENT_SHIPPED], conn=conn):
        p = event.payload
        found[p["segment"]] = Receipt(event.seq, str(p["segment"]), str(p["sha256"]),
                                      str(p["destination"]), int(p["bytes"]))
    return found


def shipped_segments(partition: Partition, conn=None) -> dict[str, str]:
    """Segment name -> SHA-256 of every segment with a receipt that matches the hash its
    compaction recorded: the segments the fleet holds (prunable first)."""
    with _reading(partition, conn) as c:
        done = receipts(partition, c)
        return {comp.segment: comp.segment_sha256 for comp in compactions(
            partition.identity_hash, c) if comp.segment in done
            and done[comp.segment].sha256 == comp.segment_sha256}


def pending_segments(partition: Partition) -> list[Compaction]:
    """The compactions whose segment has no matching receipt and was not forgotten on
    purpose, oldest first."""
    with partition.store.read() as conn:
        shipped = shipped_segments(partition, conn)
        forgotten = {e.payload.get("segment") for e in partition.events(
            kinds=[SEGMENT_FORGOTTEN], conn=conn)}
        return [c for c in compactions(partition.identity_hash, conn)
                if c.segment not in shipped and c.segment not in forgotten]


def ship_segment(partition: Partition, archive_dir: Path, destination: SegmentDestination,
                 c: Compaction, stamp_ns: int) -> Receipt:
    """Ship one segment and append its receipt; ShippingError (no receipt) otherwise."""
    where = destination.describe()
    size = destination.confirm(partition.identity_hash, c.segment, c.segment_sha256)
    if size is None:  # not there from an earlier round that stopped before its receipt
        path = archive_dir / c.segment
        if not path.exists():
            raise ShippingError(f"segment {c.segment} (seq {c.from_seq}..{c.until_seq}) is "
                                f"missing from {archive_dir}: it cannot be shipped")
        if file_sha256(path) != c.segment_sha256:
            raise ShippingError(f"segment {c.segment} in {archive_dir} does not hash to what "
                                "its compaction recorded: not shipped (verify --archives)")
        destination.upload(partition.identity_hash, c.segment, c.segment_sha256, path,
                           stamp_ns)
        size = destination.confirm(partition.identity_hash, c.segment, c.segment_sha256)
    if size is None:
        raise ShippingError(f"segment {c.segment}: {where} does not hold a copy that "
                            "re-hashes to its SHA-256 after the upload")
    event = partition.append(SEGMENT_SHIPPED, {
        "segment": c.segment, "sha256": c.segment_sha256, "destination": where,
        "bytes": size, "from_seq": c.from_seq, "until_seq": c.until_seq}, stamp_ns)
    return Receipt(event.seq, c.segment, c.segment_sha256, where, size)


@dataclass
class ShippingRound:
    """What one round did: receipts appended, segments still pending, the error that
    stopped it ("" when none)."""

    shipped: list[Receipt] = field(default_factory=list)
    pending: int = 0
    error: str = ""


class Shipper:
    """Rounds of shipping for one robot, with bounded exponential backoff between failed
    rounds and a time limit per round (what a round leaves, the next one ships).

    `clock` is monotonic seconds; `seed` seeds the jitter (deterministic per robot)."""

    def __init__(self, destination: SegmentDestination, archive_dir: Path, *,
                 backoff_cap_s: float, time_limit_s: float, seed: int | str = 0,
                 clock: Callable[[], float] = time.monotonic):
        self.destination = destination
        self.archive_dir = Path(archive_dir)
        self.backoff_cap_s = backoff_cap_s
        self.time_limit_s = time_limit_s
        self._clock = clock
        self._jitter = random.Random(seed)
        self.failures = 0  # consecutive failed rounds
        self.next_attempt = 0.0  # clock time before which no round starts
        self.last_error = ""
        self.pending = 0
        self.shipped_total = 0  # receipts this shipper appended

    def due(self) -> bool:
        return self._clock() >= self.next_attempt

    def retry_in_s(self) -> float:
        return max(0.0, self.next_attempt - self._clock())

    def backoff_s(self) -> float:
        """The wait after the current run of failures: doubling, capped, then scaled by
        a jitter factor in [0.5, 1]."""
        base = min(self.backoff_cap_s, FIRST_BACKOFF_S * 2 ** max(0, self.failures - 1))
        return base * (0.5 + 0.5 * self._jitter.random())

    def run(self, partition: Partition, now_ns: Callable[[], int]) -> ShippingRound | None:
        """One round, if due (None: waiting for the backoff to pass; what waits is
        counted still, for /diagnostics)."""
        if not self.due():
            try:
                self.pending = len(pending_segments(partition))
            except Exception:  # the store away: the count stays as it was
                pass
            return None
        result = ShippingRound()
        started, pending = self._clock(), None
        try:
            pending = pending_segments(partition)
            for c in pending:
                if self._clock() - started > self.time_limit_s:
                    break  # the rest in the next round
                result.shipped.append(ship_segment(partition, self.archive_dir,
                                                   self.destination, c, now_ns()))
        except Exception as exc:  # the destination or the store away: retried after backoff
            result.error = str(exc) if isinstance(exc, ShippingError) else error_text(exc)
        result.pending = (len(pending) if pending is not None else self.pending) - \
            len(result.shipped)
        self.shipped_total += len(result.shipped)
        self.pending = result.pending
        if result.error:
            self.failures += 1
            self.next_attempt = self._clock() + self.backoff_s()
        else:
            self.failures, self.next_attempt = 0, 0.0
        self.last_error = result.error
        return result

    def diagnostic_values(self) -> dict:
        return {"fleet_store": self.destination.describe(),
                "segments_pending": self.pending, "segments_shipped": self.shipped_total,
                "shipping_last_error": self.last_error,
                "shipping_next_retry_s": round(self.retry_in_s(), 1) if self.failures else 0.0,
                "shipping_failed_rounds": self.failures}


class _reading:
    """The caller's connection, or a read transaction of our own."""

    def __init__(self, partition: Partition, conn):
        self.partition, self.conn, self._own = partition, conn, None

    def __enter__(self):
        if self.conn is not None:
            return self.conn
        self._own = self.partition.store.read()
        return self._own.__enter__()

    def __exit__(self, *exc):
        return self._own.__exit__(*exc) if self._own is not None else False


__all__ = ["FIRST_BACKOFF_S", "Receipt", "Shipper", "ShippingRound", "pending_segments",
           "receipts", "ship_segment", "shipped_segments"]

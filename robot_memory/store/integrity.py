"""Integrity checks: does each identity's hash chain still hold?"""

from __future__ import annotations

from dataclasses import dataclass

from robot_memory.store.episodic import Partition, event_digest
from robot_memory.canonical import canonical_json
from robot_memory.store.schema import GENESIS_HASH


@dataclass(frozen=True)
class ChainReport:
    identity_hash: str
    ok: bool
    events_checked: int
    # Where it first breaks (None when ok): chain position, row id, and what is wrong.
    bad_seq: int | None = None
    bad_event_id: int | None = None
    reason: str = ""

    def describe(self) -> str:
        if self.ok:
            return f"identity {self.identity_hash[:12]}: chain intact ({self.events_checked} events)"
        return (f"identity {self.identity_hash[:12]}: chain broken at seq {self.bad_seq} "
                f"(events.id {self.bad_event_id}): {self.reason}")


def verify_chain(partition: Partition) -> ChainReport:
    """Walk the chain from genesis; report the first event that does not link or hash."""
    expected_prev, expected_seq, checked = GENESIS_HASH, 1, 0
    ident = partition.identity_hash
    for ev in partition.events():
        def broken(reason: str) -> ChainReport:
            return ChainReport(ident, False, checked, ev.seq, ev.id, reason)
        if ev.seq != expected_seq:
            return broken(f"expected seq {expected_seq}: events missing or reordered")
        if ev.prev_hash != expected_prev:
            return broken("prev_hash does not match the previous event's hash")
        digest = event_digest(ev.prev_hash, ident, ev.seq, ev.kind, ev.stamp_ns,
                              canonical_json(ev.payload))
        if digest != ev.event_hash:
            return broken("event_hash does not match its content (edited event)")
        expected_prev, expected_seq, checked = ev.event_hash, ev.seq + 1, checked + 1
    head_seq, head_hash = partition.head()
    if head_seq != checked or (checked and head_hash != expected_prev):
        return ChainReport(ident, False, checked, checked + 1, None,
                           f"chain head says {head_seq} events but {checked} are present "
                           "(truncated log)")
    return ChainReport(ident, True, checked)

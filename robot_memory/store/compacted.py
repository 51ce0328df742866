"""The chain's compacted ranges: what each `compaction` event claims, and the removal it
permits.

A compaction archives a closed range of one identity's chain, oldest first, into a sealed
segment file (robot_memory/retention/compaction.py), then, in one transaction: appends a
`compaction` event naming the range, the segment's SHA-256 and the hash at the cut; writes
a permit for the range (the append-only triggers let a DELETE through only there, see
store/guards.py); deletes the range's rows except the events that must stay live (their
seqs and hashes are digested into the event), with the request ids of the events it
removes (a retry of one stores its result again); and deletes the permit.

Verification (store/chain_check.py) then re-hashes the live chain from the newest cut,
checks every kept event against its compaction's digest, and counts rows: a row deleted
outside a compaction is found, and so is a compaction event whose claims do not fit the
rows around it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Connection, delete, insert, select, text

from robot_memory.event_kinds import COMPACTION
from robot_memory.store.schema import (OTHER_THAN_RESULTS, amendment_delta_values,
                                       amendment_deltas, compaction_permits, events,
                                       intent_events, request_ids, result_facets,
                                       result_rollup, result_values, value_rollup)

# The kind index's condition, repeated so that the compactions are read through it.
_NOT_A_RESULT = text(OTHER_THAN_RESULTS)

# Kept events named per DELETE statement (their seqs or ids in a NOT IN list).
KEPT_PER_STATEMENT = 2000


@dataclass(frozen=True)
class Compaction:
    """One `compaction` event's claims about the range from_seq..until_seq it removed."""

    seq: int  # the compaction event's own chain position
    event_id: int
    from_seq: int
    until_seq: int
    prev_hash: str  # the hash before from_seq (genesis, or the previous cut)
    cut_hash: str  # the event hash at until_seq
    first_event_id: int
    last_event_id: int
    removed: int
    kept: int
    kept_digest: str  # kept_digest() of the range's events that stayed live
    segment: str  # the segment's file name
    segment_sha256: str
    state_digest: str  # of the consolidation states at the cut (they stay live)

    @classmethod
    def of_payload(cls, seq: int, event_id: int, payload: dict) -> Compaction:
        return cls(seq, event_id, int(payload["from_seq"]), int(payload["until_seq"]),
                   str(payload["prev_hash"]), str(payload["cut_hash"]),
                   int(payload["first_event_id"]), int(payload["last_event_id"]),
                   int(payload["removed"]), int(payload["kept"]), str(payload["kept_digest"]),
                   str(payload["segment"]), str(payload["segment_sha256"]),
                   str(payload["state_digest"]))

    def payload(self) -> dict:
        return {"from_seq": self.from_seq, "until_seq": self.until_seq,
                "prev_hash": self.prev_hash, "cut_hash": self.cut_hash,
                "first_event_id": self.first_event_id, "last_event_id": self.last_event_id,
                "removed": self.removed, "kept": self.kept, "kept_digest": self.kept_digest,
                "segment": self.segment, "segment_sha256": self.segment_sha256,
                "state_digest": self.state_digest}

    def covers(self, seq: int) -> bool:
        return self.from_seq <= seq <= self.until_seq


def kept_digest(kept: Iterable[tuple[int, str]]) -> str:
    """SHA-256 over the (seq, event_hash) of the events a compaction left live, in order."""
    digest = hashlib.sha256()
    for seq, event_hash in kept:
        digest.update(f"{seq}:{event_hash}\n".encode("ascii"))
    return digest.hexdigest()


def compactions(identity_hash: str, conn: Connection) -> list[Compaction]:
    """The identity's compactions in chain order. A payload that does not parse is a
    forged or damaged event: ValueError naming it."""
    rows = conn.execute(select(events.c.id, events.c.seq, events.c.payload_json).where(
        events.c.identity_hash == identity_hash, _NOT_A_RESULT, events.c.kind == COMPACTION)
        .order_by(events.c.seq)).all()
    found = []
    for event_id, seq, payload_json in rows:
        try:
            found.append(Compaction.of_payload(seq, event_id, json.loads(payload_json)))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"compaction event at seq {seq} (events.id {event_id}) does "
                             f"not parse: {exc!r}") from None
    return found


def removed_total(found: list[Compaction]) -> int:
    return sum(c.removed for c in found)


def remove_range(conn: Connection, identity_hash: str, chain: int, from_seq: int, until_seq: int,
                 first_event_id: int, last_event_id: int, kept: list[tuple[int, int]],
                 block: int) -> None:
    """Delete the range's rows but the `kept` (seq, event id) ones, and what indexes
    them (under the identity's chain number `chain`), under a permit that is gone again
    when this returns; in the caller's transaction, which also holds the compaction
    event. By range, not by id: an identity's
    events of a range are its ids first_event_id..last_event_id. Rollup blocks wholly
    inside the range go too: a pass after the cut never reads them (it starts past it)."""
    conn.execute(insert(compaction_permits).values(
        identity_hash=identity_hash, from_seq=from_seq, until_seq=until_seq))
    kept_seqs, kept_ids = [seq for seq, _ in kept], [event_id for _, event_id in kept]
    for start in range(0, max(1, len(kept)), KEPT_PER_STATEMENT):
        # Between kept events, a range at a time (kept ones are few: safety failures...).
        low_seq = kept_seqs[start - 1] + 1 if start else from_seq
        low_id = kept_ids[start - 1] + 1 if start else first_event_id
        chunk = slice(start, start + KEPT_PER_STATEMENT)
        last = start + KEPT_PER_STATEMENT >= len(kept)
        high_seq = until_seq if last else kept_seqs[chunk][-1]
        high_id = last_event_id if last else kept_ids[chunk][-1]
        skip_seqs, skip_ids = kept_seqs[chunk], kept_ids[chunk]
        conn.execute(delete(result_values).where(
            result_values.c.chain_id == chain,
            result_values.c.event_id.between(low_id, high_id),
            result_values.c.event_id.not_in(skip_ids)))
        conn.execute(delete(request_ids).where(  # an id lives as long as its event
            request_ids.c.identity_hash == identity_hash,
            request_ids.c.event_id.between(low_id, high_id),
            request_ids.c.event_id.not_in(skip_ids)))
        conn.execute(delete(intent_events).where(  # an intent's row, with its event
            intent_events.c.chain_id == chain,
            intent_events.c.seq.between(low_seq, high_seq),
            intent_events.c.seq.not_in(skip_seqs)))
        for table in (amendment_deltas, amendment_delta_values):  # with their event
            conn.execute(delete(table).where(
                table.c.chain_id == chain, table.c.seq.between(low_seq, high_seq),
                table.c.seq.not_in(skip_seqs)))
        conn.execute(delete(result_facets).where(
            result_facets.c.chain_id == chain,
            result_facets.c.seq.between(low_seq, high_seq),
            result_facets.c.seq.not_in(skip_seqs)))
        conn.execute(delete(events).where(
            events.c.identity_hash == identity_hash, events.c.seq.between(low_seq, high_seq),
            events.c.seq.not_in(skip_seqs)))
    whole_blocks_until = until_seq // block  # blocks 0 .. this-1 end at or before the cut
    for table in (result_rollup, value_rollup):
        conn.execute(delete(table).where(table.c.chain_id == chain,
                                         table.c.seq_block < whole_blocks_until))
    conn.execute(delete(compaction_permits).where(
        compaction_permits.c.identity_hash == identity_hash))


__all__ = ["Compaction", "compactions", "kept_digest", "remove_range", "removed_total"]

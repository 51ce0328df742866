"""Re-hashing one identity's chain: is every event present, in order, and unedited?

`verify_chain` re-hashes the whole live chain (the deep check): from genesis, or from the
newest compaction's cut, the events before it that stayed live checked against their
compaction (store/compacted.py). `boot_check` is the fast one, for a boot: the chain's
structure, every event after the last verified checkpoint, and a rotating sample of the
older ones since the cut. Both name the first problem: what,
which table, which event (id and chain position). Neither repairs anything. What else a
store must pass to be trusted, and the checks of every chain at once: store/integrity.py.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from sqlalchemy import Connection, delete, func, insert, select

from robot_memory.store.bulk import placeholder
from robot_memory.store.compacted import Compaction, compactions, kept_digest, removed_total
from robot_memory.store.partition import Partition
from robot_memory.store.schema import GENESIS_HASH, chain_heads, events, verified_checkpoints

# Older events re-hashed per boot, continuing where the previous boot stopped.
BOOT_SAMPLE_EVENTS = 20_000


@dataclass(frozen=True)
class ChainReport:
    identity_hash: str
    ok: bool
    events_checked: int
    # Where it first breaks (None when ok): chain position, row id, and what is wrong.
    bad_seq: int | None = None
    bad_event_id: int | None = None
    reason: str = ""
    table: str = "events"

    def describe(self) -> str:
        if self.ok:
            return f"identity {self.identity_hash[:12]}: chain intact ({self.events_checked} " \
                   "events re-hashed)"
        where = f"seq {self.bad_seq}" if self.bad_seq is not None else "its head"
        row = f" ({self.table}.id {self.bad_event_id})" if self.bad_event_id is not None else \
            f" (table {self.table})"
        return f"identity {self.identity_hash[:12]}: chain broken at {where}{row}: {self.reason}"


def stored_digest(prev_hash: str, identity_hash: str, seq: int, kind: str, stamp_ns: int,
                  payload_json: str) -> str:
    """event_digest over the stored bytes: payloads are stored canonical, so the canonical
    body is a concatenation (no JSON decode). An edited payload, even one that decodes
    to the same value, no longer matches: the stored bytes are what is attested."""
    body = (f'{{"identity_hash":"{identity_hash}","kind":"{kind}","payload":{payload_json},'
            f'"seq":{seq},"stamp_ns":{stamp_ns}}}')
    return hashlib.sha256((prev_hash + body).encode("utf-8")).hexdigest()


_COLUMNS = (events.c.id, events.c.seq, events.c.kind, events.c.stamp_ns, events.c.payload_json,
            events.c.prev_hash, events.c.event_hash)


def _rehash(partition: Partition, conn: Connection, after_seq: int, until_seq: int,
            prev_hash: str | None, batch_size: int = 20_000) -> tuple[int, ChainReport | None]:
    """Re-hash events after_seq+1 .. until_seq in chain order; prev_hash None means the
    first one's link is not known (a sample starts mid-chain). Returns (checked, problem).

    The rows are read as the driver gives them, the hashes as the 32 bytes the store
    keeps (schema.Digest) and compared as such: converting two hashes per row to hex and
    back was a large share of a boot check's time (docs/performance.md, "Why the code is
    shaped this way")."""
    ident, expected_seq, checked = partition.identity_hash, after_seq + 1, 0
    mark = placeholder(conn)
    query = (f"SELECT id, seq, kind, stamp_ns, payload_json, prev_hash, event_hash FROM events "
             f"WHERE identity_hash = {mark} AND seq >= {mark} AND seq <= {mark} "
             f"ORDER BY seq LIMIT {int(batch_size)}")
    expected_prev = None if prev_hash is None else _stored(prev_hash)
    prev_hex = prev_hash
    driver = conn.connection.driver_connection  # plain tuples, in this transaction
    while expected_seq <= until_seq:
        rows = driver.execute(query, (ident, expected_seq, until_seq)).fetchall()
        if not rows:
            return checked, ChainReport(ident, False, checked, expected_seq, None,
                                        "event missing (deleted or truncated log)")
        for event_id, seq, kind, stamp_ns, payload_json, prev, stored in rows:
            if type(stored) is not bytes or type(prev) is not bytes:
                # hex text: a store before schema 5 (verified before it is migrated), or a
                # row written by hand
                prev, stored = _stored(str(prev)), _stored(str(stored))
            if seq != expected_seq:
                return checked, ChainReport(ident, False, checked, expected_seq, None,
                                            f"event missing (next present is seq {seq}, "
                                            f"events.id {event_id})")
            if expected_prev is not None and prev != expected_prev:
                return checked, ChainReport(ident, False, checked, seq, event_id,
                                            "prev_hash does not match the previous event's "
                                            "hash (event removed, inserted or reordered)")
            if prev_hex is None:  # a sample's first event: its own link, as stored
                prev_hex = prev.hex() if type(prev) is bytes else prev
            body = (f'{{"identity_hash":"{ident}","kind":"{kind}","payload":{payload_json},'
                    f'"seq":{seq},"stamp_ns":{stamp_ns}}}')
            digest = hashlib.sha256((prev_hex + body).encode("utf-8")).digest()
            if digest != stored:
                return checked, ChainReport(ident, False, checked, seq, event_id,
                                            "event_hash does not match its content "
                                            "(edited event)")
            expected_prev, prev_hex = stored, digest.hex()
            expected_seq, checked = seq + 1, checked + 1
    return checked, None


def _stored(hex_digest: str) -> bytes | str:
    """A hash as the store keeps it (bytes), or the text itself if it is not hex."""
    try:
        return bytes.fromhex(hex_digest)
    except ValueError:
        return hex_digest


def _head_and_count(partition: Partition, conn: Connection) -> tuple[int, str, int, int]:
    head = conn.execute(select(chain_heads.c.seq, chain_heads.c.event_hash).where(
        chain_heads.c.identity_hash == partition.identity_hash)).first()
    head_seq, head_hash = (head.seq, head.event_hash) if head else (0, GENESIS_HASH)
    count, max_seq = conn.execute(select(func.count(), func.max(events.c.seq)).where(
        events.c.identity_hash == partition.identity_hash)).one()
    return head_seq, head_hash, count, max_seq or 0


def _structure_problem(partition: Partition, conn: Connection,
                       found: list[Compaction]) -> ChainReport | None:
    """Every position 1..head present exactly once but those compactions removed, and
    nothing past the head."""
    head_seq, head_hash, count, max_seq = _head_and_count(partition, conn)
    ident = partition.identity_hash
    if max_seq > head_seq:
        return ChainReport(ident, False, 0, head_seq + 1, None,
                           f"events past the chain head ({max_seq} > {head_seq}): written "
                           "around the store", table="chain_heads")
    expected = head_seq - removed_total(found)
    if count != expected:
        says = (f"{head_seq} events, {head_seq - expected} of them removed by "
                f"compactions, so {expected} live," if found else f"{head_seq} events")
        return ChainReport(ident, False, 0, None, None,
                           f"chain head says {says} but {count} are present (deleted rows "
                           "or truncated log)", table="events")
    if head_seq:
        last = conn.execute(select(events.c.id, events.c.event_hash).where(
            events.c.identity_hash == ident, events.c.seq == head_seq)).first()
        if last is None or last.event_hash != head_hash:
            return ChainReport(ident, False, 0, head_seq, last.id if last else None,
                               "the newest event's hash differs from the chain head",
                               table="events")
    return None


def _compaction_problem(partition: Partition, conn: Connection,
                        found: list[Compaction]) -> ChainReport | None:
    """Each compaction continues the previous one, lies before its own event, and left
    live exactly the events it digested, each unedited; the first live event after the
    newest cut links to the cut's hash (checked by the re-hash that starts there)."""
    ident, prev_until, prev_hash = partition.identity_hash, 0, GENESIS_HASH
    for c in found:
        where = f"compaction event at seq {c.seq} (events.id {c.event_id})"
        if (c.from_seq != prev_until + 1 or c.until_seq < c.from_seq or c.until_seq >= c.seq
                or c.prev_hash != prev_hash
                or c.removed + c.kept != c.until_seq - c.from_seq + 1):
            return ChainReport(ident, False, 0, c.seq, c.event_id,
                               f"{where} claims a range that does not fit the chain "
                               f"({c.from_seq}..{c.until_seq} after {prev_until}; removed "
                               f"{c.removed} + kept {c.kept}): forged or damaged")
        kept = conn.execute(select(*_COLUMNS).where(
            events.c.identity_hash == ident, events.c.seq >= c.from_seq,
            events.c.seq <= c.until_seq).order_by(events.c.seq)).all()
        for event_id, seq, kind, stamp_ns, payload_json, prev, event_hash in kept:
            if stored_digest(prev, ident, seq, kind, stamp_ns, payload_json) != event_hash:
                return ChainReport(ident, False, 0, seq, event_id,
                                   "event_hash does not match its content (edited event)")
        if len(kept) != c.kept or kept_digest((row.seq, row.event_hash) for row in kept) \
                != c.kept_digest:
            return ChainReport(ident, False, 0, c.from_seq, None,
                               f"the events {where} left live are not those it recorded "
                               f"({len(kept)} present, {c.kept} recorded): deleted, "
                               "replaced or inserted after the compaction")
        prev_until, prev_hash = c.until_seq, c.cut_hash
    return None


def _anchor(found: list[Compaction]) -> tuple[int, str]:
    """Where the live chain's re-hash starts: after the newest cut, from its hash."""
    return (found[-1].until_seq, found[-1].cut_hash) if found else (0, GENESIS_HASH)


def _compactions_or_problem(partition: Partition, conn: Connection
                            ) -> tuple[list[Compaction], ChainReport | None]:
    try:
        return compactions(partition.identity_hash, conn), None
    except ValueError as exc:
        return [], ChainReport(partition.identity_hash, False, 0, None, None, str(exc))


def verify_chain(partition: Partition) -> ChainReport:
    """The whole live chain, every event re-hashed (the deep check): from genesis, or from
    the newest compaction's cut (verify the archived part with compaction.verify_archives)."""
    with partition.store.read() as conn:
        found, unreadable = _compactions_or_problem(partition, conn)
        if unreadable is not None:
            return unreadable
        problem = _structure_problem(partition, conn, found)
        head_seq = _head_and_count(partition, conn)[0]
        after_seq, after_hash = _anchor(found)
        # A compaction that does not fit the chain explains what follows from it.
        checked, broken = 0, _compaction_problem(partition, conn, found)
        if broken is None:
            checked, broken = _rehash(partition, conn, after_seq, head_seq, after_hash)
    # A broken link names the exact event; prefer it to the coarser count mismatch.
    if broken is not None:
        return broken
    if problem is not None:
        return problem
    return ChainReport(partition.identity_hash, True, checked)


def boot_check(partition: Partition, sample: int = BOOT_SAMPLE_EVENTS,
               record: bool = True) -> ChainReport:
    """The fast check: structure, the checkpoint, everything after it, and a sample of
    `sample` older events (rotating from boot to boot). With `record`, a success moves
    the checkpoint to the head."""
    ident = partition.identity_hash
    with partition.store.read() as conn:
        found, problem = _compactions_or_problem(partition, conn)
        problem = problem or _structure_problem(partition, conn, found)
        if problem is not None:
            return problem
        head_seq = _head_and_count(partition, conn)[0]
        mark = conn.execute(select(verified_checkpoints).where(
            verified_checkpoints.c.identity_hash == ident)).first()
        from_seq, from_hash = _anchor(found)
        sample_from = first_live = from_seq + 1
        if mark is not None and from_seq < mark.seq <= head_seq:
            row = conn.execute(select(events.c.id, events.c.event_hash).where(
                events.c.identity_hash == ident, events.c.seq == mark.seq)).first()
            if row is None or row.id != mark.event_id or row.event_hash != mark.event_hash:
                return ChainReport(ident, False, 0, mark.seq, row.id if row else None,
                                   "the last verified event changed since it was verified "
                                   "(history rewritten)")
            from_seq, from_hash, sample_from = mark.seq, mark.event_hash, mark.sample_from_seq
        checked, broken = _rehash(partition, conn, from_seq, head_seq, from_hash)
        if broken is not None:
            return broken
        broken = _compaction_problem(partition, conn, found)
        if broken is not None:
            return broken
        sampled, sample_end = 0, from_seq
        if from_seq >= first_live and sample:
            start = sample_from if first_live <= sample_from <= from_seq else first_live
            sample_end = min(from_seq, start + sample - 1)
            sampled, broken = _rehash(partition, conn, start - 1, sample_end, None)
            if broken is not None:
                return broken
            # The sample's first link is checked against the event before it (or the cut).
            before = _anchor(found)[1] if start == first_live else conn.execute(
                select(events.c.event_hash).where(events.c.identity_hash == ident,
                                                  events.c.seq == start - 1)).scalar()
            first = conn.execute(select(events.c.id, events.c.prev_hash).where(
                events.c.identity_hash == ident, events.c.seq == start)).first()
            if before != first.prev_hash:
                return ChainReport(ident, False, sampled, start, first.id,
                                   "prev_hash does not match the previous event's hash")
        head_row = conn.execute(select(events.c.id, events.c.event_hash).where(
            events.c.identity_hash == ident, events.c.seq == head_seq)).first()
    if record and head_row is not None:
        _record_checkpoint(partition, head_seq, head_row.id, head_row.event_hash,
                           sample_end + 1)
    return ChainReport(ident, True, checked + sampled)


def _record_checkpoint(partition: Partition, seq: int, event_id: int, event_hash: str,
                       sample_from_seq: int) -> None:
    with partition.store.write() as conn:
        conn.execute(delete(verified_checkpoints).where(
            verified_checkpoints.c.identity_hash == partition.identity_hash))
        conn.execute(insert(verified_checkpoints).values(
            identity_hash=partition.identity_hash, seq=seq, event_id=event_id,
            event_hash=event_hash, sample_from_seq=sample_from_seq))

"""The episodic log of one identity: appends that extend its hash chain, and reads.

Each identity's events form a chain: an event's hash covers the previous event's hash
and the event itself (`event_digest`), and `chain_heads` holds the newest link, whose row
lock serialises appends to one chain. An append also indexes its execution results
(store/facets.py) and the events that carry a planner intent (store/intents.py) in the
same transaction.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from sqlalchemy import Connection, func, insert, select, text
from sqlalchemy.dialects import postgresql

from robot_memory.canonical import canonical_json, plain_canonical_json, sha256_hex
from robot_memory.event_kinds import EXECUTION_RESULT
from robot_memory.store.amendments import names_an_attempt, record_attempts
from robot_memory.store.bulk import insert_rows, placeholder
from robot_memory.store.facets import ComboIds, insert_facets, roll_up_blocks
from robot_memory.store.intents import index_intents, intent_of
from robot_memory.store.schema import (GENESIS_HASH, OTHER_THAN_RESULTS, chain_heads, chains,
                                       events, result_facets)


class StoredEvent(NamedTuple):
    """An event as the log holds it, its payload decoded. A tuple: an append returns one
    per event it writes, and the logger appends a thousand a second."""

    id: int
    seq: int
    kind: str
    stamp_ns: int
    payload: dict[str, Any]
    prev_hash: str
    event_hash: str


class NewEvent(NamedTuple):
    """An event to append. A tuple, not a frozen dataclass: the logger makes a thousand
    a second, and a tuple is made in a fraction of a frozen dataclass's time
    (docs/performance.md, "Why the code is shaped this way")."""

    kind: str
    payload: dict[str, Any]
    stamp_ns: int
    # True when the payload is already what decoding its canonical JSON gives back (str
    # keys; str, bool, int, float, dict and list values only, as ExecutionRecord.payload()
    # makes): the append then skips decoding the stored bytes again.
    as_decoded: bool = False
    # True for an execution_result whose payload the intake validated (intake/admission.py):
    # its facets are read without checking the payload again.
    checked_result: bool = False


def event_digest(prev_hash: str, identity_hash: str, seq: int, kind: str, stamp_ns: int,
                 payload_json: str) -> str:
    """event_hash = H(prev_hash, canonical event): any edit, reorder or cut breaks the chain."""
    body = canonical_json({"identity_hash": identity_hash, "seq": seq, "kind": kind,
                           "stamp_ns": stamp_ns, "payload": json.loads(payload_json)})
    return sha256_hex(prev_hash + body)


def _digest_of_canonical(prev_hash: str, identity_hash: str, seq: int, kind: str,
                         stamp_ns: int, payload_json: str) -> str:
    """event_digest for a payload_json that is canonical already (as append writes it)
    and int seq and stamp_ns (written as json writes an int): the same bytes, composed in
    key order, without parsing the payload back."""
    body = (f'{_body_start(identity_hash, kind)}{payload_json},"seq":{seq:d},'
            f'"stamp_ns":{stamp_ns:d}}}')
    return sha256_hex(prev_hash + body)


@functools.lru_cache(maxsize=256)
def _body_start(identity_hash: str, kind: str) -> str:
    """The canonical event's text up to its payload: the same few identity hashes and
    kinds in every event, encoded once."""
    return (f'{{"identity_hash":{canonical_json(identity_hash)},'
            f'"kind":{canonical_json(kind)},"payload":')


def _insert_once(conn: Connection, table, **values) -> None:
    """Insert a row keyed by identity_hash unless it is there."""
    if conn.dialect.name == "postgresql":
        # Two writers may start a new identity at once; the head's row lock does the rest.
        conn.execute(postgresql.insert(table).values(**values)
                     .on_conflict_do_nothing(index_elements=["identity_hash"]))
    else:  # SQLite's write transaction already holds the whole database
        conn.execute(insert(table).values(**values))


# The kind index's own condition, as a term the query repeats (schema.OTHER_THAN_RESULTS).
_NOT_A_RESULT = text(OTHER_THAN_RESULTS)


@contextmanager
def _reading(store, conn: Connection | None) -> Iterator[Connection]:
    """The caller's connection, or a read transaction of our own for the block."""
    if conn is not None:
        yield conn
    else:
        with store.read() as own:
            yield own


def _event_from_row(row) -> StoredEvent:
    return StoredEvent(row.id, row.seq, row.kind, row.stamp_ns, json.loads(row.payload_json),
                       row.prev_hash, row.event_hash)


# The columns of the rows an append inserts into events, in order.
_EVENT_COLUMNS = ("identity_hash", "seq", "kind", "stamp_ns", "payload_json", "prev_hash",
                  "event_hash")


class EventLog:
    """The log's part of a Partition (store/partition.py), which gives it `store`,
    `identity_hash` and the combination ids appends index results under (`_combos`,
    `_combos_added_at`)."""

    # -- appends ----------------------------------------------------------------------
    def append(self, kind: str, payload: dict[str, Any], stamp_ns: int) -> StoredEvent:
        return self.append_many([NewEvent(kind, payload, stamp_ns)])[0]

    def append_many(self, new_events: Iterable[NewEvent]) -> list[StoredEvent]:
        """Append in one transaction; all or none are durable when this returns."""
        with self.store.write() as conn:
            return self.append_in(conn, new_events)

    def append_in(self, conn: Connection, new_events: Iterable[NewEvent]) -> list[StoredEvent]:
        """Append inside a caller's write transaction (facts and the run event commit
        together)."""
        seq, prev, chain = self._lock_head(conn)
        self._forget_if_rolled_back(conn, seq, prev)
        inserted = self._combos.inserted
        first_seq, ident = seq + 1, self.identity_hash
        # rows as the driver takes them, the hashes as the store keeps them (schema.Digest:
        # bytes, each converted once); links: the same hashes as hex, for the caller;
        # results: (seq, stamp_ns, payload, checked) of the execution results, to index;
        # intents: (intent_id, seq) of the events that carry one (store/intents.py)
        # named: (seq, stamp_ns, payload, payload_json) of the results that name an
        # attempt or amend one (store/amendments.py)
        rows, links, kept, results, intents, named = [], [], [], [], [], []
        fromhex, prev_stored = bytes.fromhex, bytes.fromhex(prev)
        for kind, payload, stamp_ns, as_decoded, checked_result in new_events:
            seq += 1
            stamp_ns = int(stamp_ns)
            # A decoded payload is plain data: the same bytes, from orjson when it is there.
            payload_json = (plain_canonical_json(payload) if as_decoded
                            else canonical_json(payload))
            digest = _digest_of_canonical(prev, ident, seq, kind, stamp_ns, payload_json)
            stored = fromhex(digest)
            rows.append((ident, seq, kind, stamp_ns, payload_json, prev_stored, stored))
            links.append((prev, digest))
            # Decoded once from the stored bytes (unless it is that already): the facets
            # and the returned events read it.
            if not as_decoded:
                payload = json.loads(payload_json)
            kept.append(payload)
            if kind == EXECUTION_RESULT:
                results.append((seq, stamp_ns, payload, checked_result))
                # Rare: an attempt named or amended (a payload has the keys only when
                # they are given; names_an_attempt reads them).
                if ("attempt_id" in payload or "amends" in payload) \
                        and names_an_attempt(payload):
                    named.append((seq, stamp_ns, payload, payload_json))
            intent = intent_of(kind, payload)
            if intent is not None:
                intents.append((intent, seq))
            prev, prev_stored = digest, stored
        if not rows:
            return []
        insert_rows(conn, events, _EVENT_COLUMNS, rows)
        mark = placeholder(conn)
        # Plain driver statements: the same few per batch, without SQLAlchemy's per-call
        # statement building (a good part of a small batch's cost).
        conn.exec_driver_sql(f"UPDATE chain_heads SET seq = {mark}, event_hash = {mark} "
                             f"WHERE identity_hash = {mark}", (seq, prev, ident))
        ids = dict(conn.exec_driver_sql(
            f"SELECT seq, id FROM events WHERE identity_hash = {mark} AND seq >= {mark}",
            (ident, first_seq)).all())
        insert_facets(conn, chain, [(ids[at], at, stamp_ns, payload)
                                    for at, stamp_ns, payload, _ in results], self._combos,
                      [checked for *_, checked in results])
        index_intents(conn, chain, [(intent, at, ids[at]) for intent, at in intents])
        if named:
            record_attempts(conn, ident, chain, self._combos,
                            [(ids[at], at, stamp_ns, payload, payload_json)
                             for at, stamp_ns, payload, payload_json in named])
        # The blocks this append filled are summed now, once (facets.roll_up_blocks).
        block = self.store.rollup.block
        roll_up_blocks(conn, chain, self.store.rollup, (first_seq - 1) // block, seq // block)
        if self._combos.inserted != inserted:
            self._combos_added_at = (seq, prev)
        return [StoredEvent(ids[row[1]], row[1], row[2], row[3], payload, *link)
                for row, payload, link in zip(rows, kept, links)]

    def _forget_if_rolled_back(self, conn: Connection, head_seq: int, head_hash: str) -> None:
        """Drop the combination ids an append inserted and cached if its transaction was
        rolled back (the event it left at the head is not there): SQLite gives those ids
        to the next rows, and results would be indexed under another combination. Only
        after an append that inserted some, and only a head other than the one it left
        is looked up (usually another writer appended since)."""
        added_at, self._combos_added_at = self._combos_added_at, None
        if added_at is None or added_at == (head_seq, head_hash):
            return
        if conn.execute(select(events.c.event_hash).where(
                events.c.identity_hash == self.identity_hash,
                events.c.seq == added_at[0])).scalar() != added_at[1]:
            self._combos = ComboIds(self.identity_hash)

    def _lock_head(self, conn: Connection) -> tuple[int, str, int]:
        """(seq, hash, chain number) of the head, locked; a new identity's chain starts
        here (its head row and its `chains` row, in the caller's transaction)."""
        mark = placeholder(conn)
        lock = " FOR UPDATE" if conn.dialect.name == "postgresql" else ""
        query = (f"SELECT seq, event_hash, (SELECT chain_id FROM chains WHERE identity_hash "
                 f"= {mark}) FROM chain_heads WHERE identity_hash = {mark}{lock}",
                 (self.identity_hash, self.identity_hash))
        head = conn.exec_driver_sql(*query).first()
        if head is None or head[2] is None:
            if head is None:
                _insert_once(conn, chain_heads, identity_hash=self.identity_hash, seq=0,
                             event_hash=GENESIS_HASH)
            _insert_once(conn, chains, identity_hash=self.identity_hash)
            head = conn.exec_driver_sql(*query).first()
        return head[0], head[1], head[2]

    def chain_number(self, conn: Connection) -> int:
        """This identity's chain number in the result index (chains), or 0 (which no row
        carries) while it has none. Cached once seen: a chain's row never changes."""
        if self._chain_number is None:
            mark = placeholder(conn)
            found = conn.exec_driver_sql(
                f"SELECT chain_id FROM chains WHERE identity_hash = {mark}",
                (self.identity_hash,)).scalar()
            if found is None:
                return 0
            self._chain_number = found
        return self._chain_number

    def head(self, conn: Connection | None = None) -> tuple[int, str]:
        """(seq, hash) of the newest event. Pass the caller's read transaction to get the
        head of the same snapshot its other queries see: a head read on a fresh connection
        may count events that snapshot cannot see yet."""
        if conn is None:
            with self.store.read() as own:
                return self.head(own)
        row = conn.execute(select(chain_heads.c.seq, chain_heads.c.event_hash).where(
            chain_heads.c.identity_hash == self.identity_hash)).first()
        return (row.seq, row.event_hash) if row else (0, GENESIS_HASH)

    # -- reads ------------------------------------------------------------------------
    def _of_kinds(self, columns, kinds: list[str] | None, conn: Connection):
        """(select of `columns` from this identity's events of these kinds, the seq column
        to range and order it by), through the index that holds them: result_facets for
        execution results alone, the kind index for other kinds (whose condition the
        query repeats: see schema.OTHER_THAN_RESULTS), the chain for a mix."""
        if kinds == [EXECUTION_RESULT]:
            joined = events.join(result_facets, result_facets.c.event_id == events.c.id)
            return (select(*columns).select_from(joined)
                    .where(result_facets.c.chain_id == self.chain_number(conn)),
                    result_facets.c.seq)
        query = select(*columns).where(events.c.identity_hash == self.identity_hash)
        if kinds is not None:
            if EXECUTION_RESULT not in kinds:
                query = query.where(_NOT_A_RESULT)
            query = query.where(events.c.kind.in_(kinds) if len(kinds) != 1
                                else events.c.kind == kinds[0])
        return query, events.c.seq

    def events(self, kinds: Iterable[str] | None = None, after_seq: int = 0,
               until_seq: int | None = None, batch_size: int = 5000,
               conn: Connection | None = None) -> Iterator[StoredEvent]:
        """Events in chain order, read in batches so 10^6 rows never sit in memory."""
        kinds = list(kinds) if kinds is not None else None
        cursor = after_seq
        while True:
            with _reading(self.store, conn) as reader:
                query, seq = self._of_kinds(events.c, kinds, reader)
                query = query.where(seq > cursor)
                if until_seq is not None:
                    query = query.where(seq <= until_seq)
                batch = reader.execute(query.order_by(seq).limit(batch_size)).all()
            for row in batch:
                yield _event_from_row(row)
            if len(batch) < batch_size:
                return
            cursor = batch[-1].seq

    def payload_rows(self, kind: str, after_seq: int, until_seq: int, conn: Connection,
                     batch_size: int = 20000) -> Iterator[tuple[int, int, int, str]]:
        """(id, seq, stamp_ns, payload_json) of one kind, in chain order: the lean read a
        consolidation pass makes over hundreds of thousands of rows."""
        columns = (events.c.id, events.c.seq, events.c.stamp_ns, events.c.payload_json)
        cursor = after_seq
        while True:
            query, seq = self._of_kinds(columns, [kind], conn)
            batch = conn.execute(query.where(seq > cursor, seq <= until_seq)
                                 .order_by(seq).limit(batch_size)).all()
            yield from batch
            if len(batch) < batch_size:
                return
            cursor = batch[-1][1]

    def event_by_id(self, event_id: int) -> StoredEvent | None:
        with self.store.read() as conn:
            row = conn.execute(select(events).where(events.c.identity_hash == self.identity_hash,
                                                    events.c.id == event_id)).first()
        return _event_from_row(row) if row else None

    def count_events(self, kind: str | None = None) -> int:
        with self.store.read() as conn:
            query, _ = self._of_kinds([func.count()], None if kind is None else [kind], conn)
            return conn.execute(query).scalar_one()

    def latest_event(self, kind: str, conn: Connection | None = None) -> StoredEvent | None:
        with _reading(self.store, conn) as reader:
            query, seq = self._of_kinds(events.c, [kind], reader)
            row = reader.execute(query.order_by(seq.desc()).limit(1)).first()
        return _event_from_row(row) if row else None

    def latest_payload_json(self, kind: str, conn: Connection) -> tuple[int, int, str] | None:
        """(seq, id, payload as stored) of the newest event of this kind, undecoded: a
        caller that needs a few fields of a large payload parses only those."""
        query, seq = self._of_kinds((events.c.seq, events.c.id, events.c.payload_json),
                                    [kind], conn)
        row = conn.execute(query.order_by(seq.desc()).limit(1)).first()
        return (row[0], row[1], row[2]) if row else None

    def _latest_seq(self, kind: str, conn: Connection) -> int:
        """seq of the newest event of this kind (0 if none), without reading its payload
        (a run's lists every fact it touched: thousands of keys to decode for one number)."""
        query, seq = self._of_kinds([events.c.seq], [kind], conn)
        return conn.execute(query.order_by(seq.desc()).limit(1)).scalar() or 0

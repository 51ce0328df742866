"""The memory store: an identity-partitioned, append-only, hash-chained episodic log
plus the semantic facts derived from it.

Code outside this package reaches the data only through a `Partition`, which is bound
to one identity hash: there is no call that reads or writes another identity's rows.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, insert, inspect, select, text, update
from sqlalchemy.dialects import postgresql

from robot_memory.canonical import canonical_json, sha256_hex
from robot_memory.errors import StoreFailure
from robot_memory.store.engine import create_store_engine
from robot_memory.store.guards import guards_installed, install_append_only_guards
from robot_memory.store.schema import (
    GENESIS_HASH,
    SCHEMA_VERSION,
    chain_heads,
    events,
    metadata,
    semantic_facts,
    store_info,
)

SCHEMA_LOCK_KEY = 0x524D454D  # pg_advisory_xact_lock key for schema creation


class StoreError(StoreFailure):
    """Raised when the store cannot be opened or has an unknown schema version."""


@dataclass(frozen=True)
class StoredEvent:
    id: int
    seq: int
    kind: str
    stamp_ns: int
    payload: dict[str, Any]
    prev_hash: str
    event_hash: str


@dataclass(frozen=True)
class NewEvent:
    kind: str
    payload: dict[str, Any]
    stamp_ns: int


@dataclass(frozen=True)
class FactRow:
    id: int
    kind: str
    key: str
    value: dict[str, Any]
    value_json: str
    status: str
    confidence: float
    n_observations: int
    rule_version: str
    last_supporting_event_id: int
    last_updated_ns: int


def event_digest(prev_hash: str, identity_hash: str, seq: int, kind: str, stamp_ns: int,
                 payload_json: str) -> str:
    """event_hash = H(prev_hash, canonical event): any edit, reorder or cut breaks the chain."""
    body = canonical_json({"identity_hash": identity_hash, "seq": seq, "kind": kind,
                           "stamp_ns": stamp_ns, "payload": json.loads(payload_json)})
    return sha256_hex(prev_hash + body)


def _all_tables_exist(conn: Connection) -> bool:
    return set(metadata.tables) <= set(inspect(conn).get_table_names())


def _digest_of_canonical(prev_hash: str, identity_hash: str, seq: int, kind: str,
                         stamp_ns: int, payload_json: str) -> str:
    """event_digest for a payload_json that is canonical already (as append writes it):
    the same bytes, composed in key order, without parsing the payload back."""
    body = (f'{{"identity_hash":{canonical_json(identity_hash)},"kind":{canonical_json(kind)},'
            f'"payload":{payload_json},"seq":{canonical_json(seq)},'
            f'"stamp_ns":{canonical_json(stamp_ns)}}}')
    return sha256_hex(prev_hash + body)


def _event_from_row(row) -> StoredEvent:
    return StoredEvent(row.id, row.seq, row.kind, row.stamp_ns, json.loads(row.payload_json),
                       row.prev_hash, row.event_hash)


def _interned_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {sys.intern(key): value for key, value in pairs}


def fact_from_row(row) -> FactRow:
    # Fact values share a small key vocabulary: one copy of each key, not one per fact,
    # takes about 40% off the memory of the facts a node holds (10^4 facts: 32 -> 20 MB).
    value = json.loads(row.fact_value_json, object_pairs_hook=_interned_keys)
    return FactRow(row.id, row.fact_kind, row.fact_key, value,
                   row.fact_value_json, row.status, row.confidence, row.n_observations,
                   row.rule_version, row.last_supporting_event_id, row.last_updated_ns)


class MemoryStore:
    """Opens (and on first use creates) the store at a SQLAlchemy URL."""

    def __init__(self, url: str, *, synchronous: str = "NORMAL"):
        self.url = url
        self.engine = create_store_engine(url, synchronous)
        self._writer = self.engine.execution_options(write=True)
        # SQLite's read transactions are snapshots already; PostgreSQL's default (read
        # committed) would let a multi-statement read see two different states.
        self._reader = (self.engine.execution_options(isolation_level="REPEATABLE READ")
                        if self.engine.dialect.name == "postgresql" else self.engine)
        with self.write() as conn:
            if conn.dialect.name == "postgresql":
                # Robots of a fleet may open a new database at once: one creates the schema.
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
            # DDL only when something is missing: a fleet's runtime role may not create.
            if not (guards_installed(conn) and _all_tables_exist(conn)):
                metadata.create_all(conn)
                install_append_only_guards(conn)
            version = conn.execute(select(store_info.c.value).where(
                store_info.c.key == "schema_version")).scalar()
            if version is None:
                conn.execute(insert(store_info).values(key="schema_version",
                                                       value=str(SCHEMA_VERSION)))
            elif int(version) != SCHEMA_VERSION:
                raise StoreError(f"store {url} has schema version {version}, "
                                 f"this robot_memory reads version {SCHEMA_VERSION}")

    def read(self):
        """A read transaction (a consistent snapshot)."""
        return self._reader.begin()

    def write(self):
        """A write transaction that holds the store's write lock from its start."""
        return self._writer.begin()

    def write_connection(self) -> Connection:
        """A connection for one long-lived writer (one thread): each `begin()` on it is a
        write transaction like `write()`'s, without opening a SQLite connection (PRAGMAs,
        and a WAL checkpoint on close) per batch. The caller closes it."""
        return self._writer.connect()

    def partition(self, identity_hash: str) -> Partition:
        return Partition(self, identity_hash)

    def identities(self) -> list[str]:
        with self.read() as conn:
            return list(conn.execute(select(chain_heads.c.identity_hash)
                                     .order_by(chain_heads.c.identity_hash)).scalars())

    def close(self) -> None:
        self.engine.dispose()


class Partition:
    """One identity's slice of the store; the only handle nodes and commands get."""

    def __init__(self, store: MemoryStore, identity_hash: str):
        self.store = store
        self.identity_hash = identity_hash

    # -- episodic log -----------------------------------------------------------------
    def append(self, kind: str, payload: dict[str, Any], stamp_ns: int) -> StoredEvent:
        return self.append_many([NewEvent(kind, payload, stamp_ns)])[0]

    def append_many(self, new_events: Iterable[NewEvent]) -> list[StoredEvent]:
        """Append in one transaction; all or none are durable when this returns."""
        with self.store.write() as conn:
            return self.append_in(conn, new_events)

    def append_in(self, conn: Connection, new_events: Iterable[NewEvent]) -> list[StoredEvent]:
        """Append inside a caller's write transaction (so facts and the run event commit together)."""
        seq, prev = self._lock_head(conn)
        rows = []
        for item in new_events:
            seq += 1
            payload_json = canonical_json(item.payload)
            digest = _digest_of_canonical(prev, self.identity_hash, seq, item.kind,
                                          item.stamp_ns, payload_json)
            rows.append({"identity_hash": self.identity_hash, "seq": seq, "kind": item.kind,
                         "stamp_ns": int(item.stamp_ns), "payload_json": payload_json,
                         "prev_hash": prev, "event_hash": digest})
            prev = digest
        if not rows:
            return []
        conn.execute(insert(events), rows)
        conn.execute(update(chain_heads).where(chain_heads.c.identity_hash == self.identity_hash)
                     .values(seq=seq, event_hash=prev))
        ids = dict(conn.execute(select(events.c.seq, events.c.id).where(
            events.c.identity_hash == self.identity_hash,
            events.c.seq >= rows[0]["seq"])).all())
        return [StoredEvent(ids[r["seq"]], r["seq"], r["kind"], r["stamp_ns"],
                            json.loads(r["payload_json"]), r["prev_hash"], r["event_hash"])
                for r in rows]

    def _lock_head(self, conn: Connection) -> tuple[int, str]:
        query = (select(chain_heads.c.seq, chain_heads.c.event_hash)
                 .where(chain_heads.c.identity_hash == self.identity_hash).with_for_update())
        head = conn.execute(query).first()
        if head is None:
            values = dict(identity_hash=self.identity_hash, seq=0, event_hash=GENESIS_HASH)
            if conn.dialect.name == "postgresql":
                # Two writers may start a new identity at once; the row lock does the rest.
                conn.execute(postgresql.insert(chain_heads).values(**values)
                             .on_conflict_do_nothing(index_elements=["identity_hash"]))
            else:  # SQLite's write transaction already holds the whole database
                conn.execute(insert(chain_heads).values(**values))
            head = conn.execute(query).first()
        return head.seq, head.event_hash

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

    def events(self, kinds: Iterable[str] | None = None, after_seq: int = 0,
               until_seq: int | None = None, batch_size: int = 5000,
               conn: Connection | None = None) -> Iterator[StoredEvent]:
        """Events in chain order, read in batches so 10^6 rows never sit in memory."""
        kinds = list(kinds) if kinds is not None else None
        cursor = after_seq
        while True:
            query = select(events).where(events.c.identity_hash == self.identity_hash,
                                         events.c.seq > cursor)
            if kinds is not None:
                query = query.where(events.c.kind.in_(kinds))
            if until_seq is not None:
                query = query.where(events.c.seq <= until_seq)
            query = query.order_by(events.c.seq).limit(batch_size)
            if conn is None:
                with self.store.read() as own:
                    batch = own.execute(query).all()
            else:
                batch = conn.execute(query).all()
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
            batch = conn.execute(
                select(*columns).where(events.c.identity_hash == self.identity_hash,
                                       events.c.kind == kind, events.c.seq > cursor,
                                       events.c.seq <= until_seq)
                .order_by(events.c.seq).limit(batch_size)).all()
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
        query = select(func.count()).select_from(events).where(
            events.c.identity_hash == self.identity_hash)
        if kind is not None:
            query = query.where(events.c.kind == kind)
        with self.store.read() as conn:
            return conn.execute(query).scalar_one()

    def latest_event(self, kind: str, conn: Connection | None = None) -> StoredEvent | None:
        query = (select(events).where(events.c.identity_hash == self.identity_hash,
                                      events.c.kind == kind)
                 .order_by(events.c.seq.desc()).limit(1))
        if conn is None:
            with self.store.read() as own:
                row = own.execute(query).first()
        else:
            row = conn.execute(query).first()
        return _event_from_row(row) if row else None

    # -- semantic facts ---------------------------------------------------------------
    def facts_by_key(self, keys: set[tuple[str, str]], conn: Connection) -> list[FactRow]:
        """Only the facts with these (kind, key): a pass compares what it touched, not
        the whole table."""
        found: list[FactRow] = []
        by_kind: dict[str, list[str]] = {}
        for kind, key in keys:
            by_kind.setdefault(kind, []).append(key)
        for kind, kind_keys in sorted(by_kind.items()):
            for start in range(0, len(kind_keys), 500):  # stay under bind-parameter limits
                query = select(semantic_facts).where(
                    semantic_facts.c.identity_hash == self.identity_hash,
                    semantic_facts.c.fact_kind == kind,
                    semantic_facts.c.fact_key.in_(sorted(kind_keys)[start:start + 500]))
                found += [fact_from_row(r) for r in conn.execute(query)]
        return found

    def facts(self, conn: Connection | None = None) -> list[FactRow]:
        query = (select(semantic_facts)
                 .where(semantic_facts.c.identity_hash == self.identity_hash)
                 .order_by(semantic_facts.c.fact_kind, semantic_facts.c.fact_key))
        if conn is None:
            with self.store.read() as own:
                return [fact_from_row(r) for r in own.execute(query)]
        return [fact_from_row(r) for r in conn.execute(query)]

"""The memory store: an identity-partitioned, append-only, hash-chained episodic log
plus the semantic facts derived from it.

Code outside this package reaches the data only through a `Partition`, which is bound
to one identity hash: there is no call that reads or writes another identity's rows.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import Connection, delete, func, insert, inspect, select, text
from sqlalchemy.dialects import postgresql

from robot_memory.canonical import canonical_json, plain_canonical_json, sha256_hex
from robot_memory.errors import ConsolidationError, StoreFailure
from robot_memory.event_kinds import CONSOLIDATION_RUN, EXECUTION_RESULT
from robot_memory.store.engine import create_store_engine
from robot_memory.store.bulk import insert_rows
from robot_memory.store.facets import ComboIds, floor_div_sql, insert_facets, roll_up_blocks
from robot_memory.store.guards import guards_installed, install_append_only_guards
from robot_memory.store.schema import (
    GENESIS_HASH,
    PARAMETER,
    SCHEMA_VERSION,
    RollupShape,
    chain_heads,
    consolidation_state,
    events,
    metadata,
    semantic_facts,
    store_info,
)

# Schema versions this code can open: older ones are migrated (store/migration.py).
MIGRATABLE_VERSIONS = (1, 2, 3)
# store_info keys of the RollupShape
ROLLUP_KEYS = {"block": "rollup_block", "bucket_ns": "rollup_bucket_ns"}

SCHEMA_LOCK_KEY = 0x524D454D  # pg_advisory_xact_lock key for schema creation


# Results in a range read with just the combinations it uses (ComboIds.for_short_range).
SHORT_RANGE = 20_000


class StoreError(StoreFailure):
    """Raised when the store cannot be opened or has an unknown schema version."""


class ConcurrentPass(ConsolidationError):
    """Raised when another pass committed for this identity while this one was computing."""


@dataclass(frozen=True)
class StoredEvent:
    id: int
    seq: int
    kind: str
    stamp_ns: int
    payload: dict[str, Any]
    prev_hash: str
    event_hash: str


class NewEvent(NamedTuple):
    """An event to append. A tuple, not a frozen dataclass: the logger makes a thousand
    a second, at 0.4 µs each instead of 1.1."""

    kind: str
    payload: dict[str, Any]
    stamp_ns: int
    # True when the payload is already what decoding its canonical JSON gives back (str
    # keys; str, bool, int, float, dict and list values only, as ExecutionRecord.payload()
    # makes): the append then skips decoding the stored bytes again.
    as_decoded: bool = False
    # True for an execution_result made by `of_record`: its facets are read without
    # checking the payload again.
    checked_result: bool = False

    @classmethod
    def of_record(cls, record) -> NewEvent:
        """The execution_result event of a validated ExecutionRecord."""
        return cls(EXECUTION_RESULT, record.payload(), record.stamp_ns, True, True)


@dataclass(frozen=True)
class FactRow:
    """A stored fact. Its value is parsed from value_json on first use: a pass compares
    the JSON text of the facts it touches and never needs most of them as dicts."""

    id: int
    kind: str
    key: str
    parsed: dict[str, Any] | None = field(compare=False, repr=False)  # None: not yet
    value_json: str
    status: str
    confidence: float
    n_observations: int
    rule_version: str
    last_supporting_event_id: int
    last_updated_ns: int

    @property
    def value(self) -> dict[str, Any]:
        if self.parsed is None:
            object.__setattr__(self, "parsed", _parse_fact_value(self.value_json))
        return self.parsed

    def peek_value(self) -> dict[str, Any]:
        """The value for one look, not kept: a holder of 10^4 facts that needs a few of
        each value's fields would otherwise keep every value parsed (2 KB a fact)."""
        return self.parsed if self.parsed is not None else _parse_fact_value(self.value_json)


def event_digest(prev_hash: str, identity_hash: str, seq: int, kind: str, stamp_ns: int,
                 payload_json: str) -> str:
    """event_hash = H(prev_hash, canonical event): any edit, reorder or cut breaks the chain."""
    body = canonical_json({"identity_hash": identity_hash, "seq": seq, "kind": kind,
                           "stamp_ns": stamp_ns, "payload": json.loads(payload_json)})
    return sha256_hex(prev_hash + body)


def rollup_shape_of(conn: Connection) -> RollupShape:
    """The store's RollupShape (store_info)."""
    stored = dict(conn.execute(select(store_info.c.key, store_info.c.value).where(
        store_info.c.key.in_(ROLLUP_KEYS.values()))).all())
    return RollupShape(**{field: int(stored[key]) for field, key in ROLLUP_KEYS.items()})


def record_rollup_shape(conn: Connection, shape: RollupShape) -> None:
    conn.execute(insert(store_info), [{"key": key, "value": str(int(getattr(shape, field)))}
                                      for field, key in ROLLUP_KEYS.items()])


def _all_tables_exist(conn: Connection) -> bool:
    return set(metadata.tables) <= set(inspect(conn).get_table_names())


def _digest_of_canonical(prev_hash: str, identity_hash: str, seq: int, kind: str,
                         stamp_ns: int, payload_json: str) -> str:
    """event_digest for a payload_json that is canonical already (as append writes it):
    the same bytes, composed in key order, without parsing the payload back."""
    body = (f'{_body_start(identity_hash, kind)}{payload_json},"seq":{_json_int(seq)},'
            f'"stamp_ns":{_json_int(stamp_ns)}}}')
    return sha256_hex(prev_hash + body)


@functools.lru_cache(maxsize=256)
def _body_start(identity_hash: str, kind: str) -> str:
    """The canonical event's text up to its payload: the same few identity hashes and
    kinds in every event, encoded once."""
    return (f'{{"identity_hash":{canonical_json(identity_hash)},'
            f'"kind":{canonical_json(kind)},"payload":')


def _json_int(value: int) -> str:
    """canonical_json of an int (what json writes for one), without a json.dumps call."""
    return int.__repr__(value) if type(value) is int else canonical_json(value)


def _event_from_row(row) -> StoredEvent:
    return StoredEvent(row.id, row.seq, row.kind, row.stamp_ns, json.loads(row.payload_json),
                       row.prev_hash, row.event_hash)


def _interned_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {sys.intern(key): value for key, value in pairs}


def _parse_fact_value(value_json: str) -> dict[str, Any]:
    # Fact values share a small key vocabulary: one copy of each key, not one per fact,
    # takes about 40% off the memory of the facts a node holds (10^4 facts: 32 -> 20 MB).
    return json.loads(value_json, object_pairs_hook=_interned_keys)


def fact_from_row(row) -> FactRow:
    return FactRow(row.id, row.fact_kind, row.fact_key, None,
                   row.fact_value_json, row.status, row.confidence, row.n_observations,
                   row.rule_version, row.last_supporting_event_id, row.last_updated_ns)


class MemoryStore:
    """Opens (and on first use creates) the store at a SQLAlchemy URL."""

    def __init__(self, url: str, *, synchronous: str = "NORMAL", migrate: bool = True,
                 rollup: RollupShape = RollupShape(), keep_open: bool = False):
        """rollup: the shape of the rollups, for a store created or migrated by this open
        (an existing store keeps the shape it was created or migrated with).

        keep_open: for a long-lived process (the consolidator node) that checkpoints the
        SQLite write-ahead log itself, when it is idle (checkpoint_log): one idle
        connection is held until close(), and this store's commits do not checkpoint.
        Otherwise SQLite copies the log back into the database file and syncs it when
        its LAST connection closes (NullPool: every transaction's own connection, when no
        other process has the store open) or in the commit that leaves the log over 1000
        pages: a pass would end by copying back what it just wrote (a sixth of an
        incremental pass). Commits are what they were: a committed transaction is in the
        log, and a crash keeps it whole or drops it whole."""
        self.url = url
        self._held: Connection | None = None
        self.migration = None  # the MigrationReport, when this open upgraded the schema
        self.rollup = rollup  # until the store's own is read (below)
        self.engine = create_store_engine(url, synchronous, auto_checkpoint=not keep_open)
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
                record_rollup_shape(conn, rollup)
            elif int(version) != SCHEMA_VERSION and not (
                    migrate and int(version) in MIGRATABLE_VERSIONS):
                raise StoreError(f"store {url} has schema version {version}, "
                                 f"this robot_memory reads version {SCHEMA_VERSION}"
                                 + (" (run `robot-memory migrate`)"
                                    if int(version) in MIGRATABLE_VERSIONS else ""))
        if version is not None and int(version) != SCHEMA_VERSION:
            from robot_memory.store.migration import migrate_store  # needs integrity
            self.migration = migrate_store(self)
        with self.read() as conn:
            self.rollup = rollup_shape_of(conn)
        if keep_open and self.engine.dialect.name == "sqlite":
            # Idle: it holds no transaction, so it blocks no checkpoint and no writer.
            self._held = self.engine.connect()

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

    def checkpoint_log(self) -> None:
        """Copy the SQLite write-ahead log back into the database file, sync it and empty
        the log file (the growth guard counts it), without waiting for anyone: what
        readers or a writer still need stays in the log for a later checkpoint. Nothing
        to do on PostgreSQL. For a keep_open store's owner, between its transactions."""
        if self.engine.dialect.name != "sqlite":
            return
        # The driver's connection, in autocommit: SQLite checkpoints only outside a
        # transaction, and SQLAlchemy would begin one. No busy wait: TRUNCATE then does
        # what PASSIVE does when a reader or writer is active, and truncates otherwise.
        raw = self.engine.raw_connection()
        try:
            cursor = raw.cursor()
            cursor.execute("PRAGMA busy_timeout=0")
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            raw.close()

    def close(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.close()  # the last connection (if no one else has the store open)
        self.engine.dispose()


def _batched(result, size: int = 5000) -> Iterator:
    """The rows of a result, fetched `size` at a time (plain iteration, and yield_per on
    SQLite, fetch one row per driver call: a third of a big pass's read time)."""
    for batch in result.partitions(size):
        yield from batch


def _whole_blocks(after_seq: int, until_seq: int, size: int) -> tuple[int, int] | None:
    """[first, end) of the rollup blocks that after_seq < seq <= until_seq covers whole
    (block b holds seq b*size+1 .. (b+1)*size), or None when it covers none."""
    first, end = -(-after_seq // size), until_seq // size
    return (first, end) if first < end else None


@dataclass
class ValueBatch:
    """Some of a range's parameters and observations, aggregated (value x count).

    parameters: (skill_id, target_class, environment, success, failure_reason, name,
      value_repr, count)
    observations: (target_class, name, value_repr, count, max id, max stamp)
    """

    parameters: list[tuple]
    observations: list[tuple]


@dataclass
class ResultAggregates:
    """Execution results of a range of one chain, aggregated in SQL. Both are streamed
    from the cursor: iterate `outcomes` once, then `values` once.

    outcomes: (invalid_reason, skill_id, target_class, environment, zone, success,
      failure_reason, has_observations, bucket, count, min id, max id, max stamp, min seq)
    values: ValueBatch after ValueBatch
    """

    outcomes: Iterable[tuple]
    values: Iterable[ValueBatch]


class FactWrite(NamedTuple):
    """A fact a pass writes: a new row (row_id None) or an update of row `row_id`. A
    tuple: a pass writes thousands, and the columns go to the driver as they are."""

    row_id: int | None
    kind: str
    key: str
    fact_value_json: str
    status: str
    confidence: float
    n_observations: int
    rule_version: str
    last_supporting_event_id: int
    last_updated_ns: int


# The columns of a FactWrite after its row id, kind and key, in order.
_FACT_WRITE_COLUMNS = FactWrite._fields[3:]


# FactRow's fields in order, its parsed value (left None) after the first three.
_FACT_COLUMNS = ("id, fact_kind, fact_key, fact_value_json, status, confidence, n_observations, "
                 "rule_version, last_supporting_event_id, last_updated_ns")
_EVENT_COLUMNS = ("identity_hash", "seq", "kind", "stamp_ns", "payload_json", "prev_hash",
                  "event_hash")


class Partition:
    """One identity's slice of the store; the only handle nodes and commands get."""

    def __init__(self, store: MemoryStore, identity_hash: str):
        self.store = store
        self.identity_hash = identity_hash
        self._combos = ComboIds(identity_hash)
        # Where the last append that inserted combinations left the head, until it is
        # seen committed (_forget_if_rolled_back).
        self._combos_added_at: tuple[int, str] | None = None

    # -- episodic log -----------------------------------------------------------------
    def append(self, kind: str, payload: dict[str, Any], stamp_ns: int) -> StoredEvent:
        return self.append_many([NewEvent(kind, payload, stamp_ns)])[0]

    def append_many(self, new_events: Iterable[NewEvent]) -> list[StoredEvent]:
        """Append in one transaction; all or none are durable when this returns."""
        with self.store.write() as conn:
            return self.append_in(conn, new_events)

    def append_in(self, conn: Connection, new_events: Iterable[NewEvent]) -> list[StoredEvent]:
        """Append inside a caller's write transaction (so facts and the run event commit together)."""
        return [StoredEvent(*fields) for fields in self.append_fields_in(conn, new_events)]

    def append_fields_in(self, conn: Connection, new_events: Iterable[NewEvent]) -> list[tuple]:
        """append_in, giving each appended event's StoredEvent fields as a tuple (id, seq,
        kind, stamp_ns, payload, prev_hash, event_hash): a caller that needs few of them
        as events (the logger: its acknowledged writes) does not make the rest."""
        seq, prev = self._lock_head(conn)
        self._forget_if_rolled_back(conn, seq, prev)
        inserted = self._combos.inserted
        first_seq, ident = seq + 1, self.identity_hash
        rows, kept, checked = [], [], []
        for kind, payload, stamp_ns, as_decoded, checked_result in new_events:
            seq += 1
            # A decoded payload is plain data: the same bytes, from orjson when it is there.
            payload_json = (plain_canonical_json(payload) if as_decoded
                            else canonical_json(payload))
            digest = _digest_of_canonical(prev, ident, seq, kind, stamp_ns, payload_json)
            rows.append((ident, seq, kind, int(stamp_ns), payload_json, prev, digest))
            # Decoded once from the stored bytes (unless it is that already): the facets
            # and the returned events read it.
            kept.append(payload if as_decoded else json.loads(payload_json))
            checked.append(checked_result)
            prev = digest
        if not rows:
            return []
        insert_rows(conn, events, _EVENT_COLUMNS, rows)
        mark = _placeholder(conn)
        # Plain driver statements: the same few per batch, without SQLAlchemy's per-call
        # statement building (a good part of a small batch's cost).
        conn.exec_driver_sql(f"UPDATE chain_heads SET seq = {mark}, event_hash = {mark} "
                             f"WHERE identity_hash = {mark}", (seq, prev, ident))
        ids = dict(conn.exec_driver_sql(
            f"SELECT seq, id FROM events WHERE identity_hash = {mark} AND seq >= {mark}",
            (ident, first_seq)).all())
        results = [i for i, row in enumerate(rows) if row[2] == EXECUTION_RESULT]
        insert_facets(conn, [(ids[rows[i][1]], rows[i][1], rows[i][3], kept[i])
                             for i in results], self._combos, [checked[i] for i in results])
        # The blocks this append filled are summed now, once (facets.roll_up_blocks).
        block = self.store.rollup.block
        roll_up_blocks(conn, ident, self.store.rollup, (first_seq - 1) // block, seq // block)
        if self._combos.inserted != inserted:
            self._combos_added_at = (seq, prev)
        return [(ids[row[1]], row[1], row[2], row[3], payload, row[5], row[6])
                for row, payload in zip(rows, kept)]

    def _forget_if_rolled_back(self, conn: Connection, head_seq: int, head_hash: str) -> None:
        """Drop the combination ids an append inserted and cached if its transaction was
        rolled back (the event it left at the head is not there): SQLite gives those ids
        to the next rows, and results would be indexed under another combination. Only
        after an append that inserted some, and only a head other than the one it left
        is looked up (usually another writer appended since)."""
        added_at, self._combos_added_at = self._combos_added_at, None
        if added_at is None or added_at == (head_seq, head_hash):
            return
        mark = _placeholder(conn)
        if conn.exec_driver_sql(
                f"SELECT event_hash FROM events WHERE identity_hash = {mark} AND seq = {mark}",
                (self.identity_hash, added_at[0])).scalar() != added_at[1]:
            self._combos = ComboIds(self.identity_hash)

    def _lock_head(self, conn: Connection) -> tuple[int, str]:
        mark = _placeholder(conn)
        lock = " FOR UPDATE" if conn.dialect.name == "postgresql" else ""
        query = (f"SELECT seq, event_hash FROM chain_heads WHERE identity_hash = {mark}{lock}",
                 (self.identity_hash,))
        head = conn.exec_driver_sql(*query).first()
        if head is None:
            values = dict(identity_hash=self.identity_hash, seq=0, event_hash=GENESIS_HASH)
            if conn.dialect.name == "postgresql":
                # Two writers may start a new identity at once; the row lock does the rest.
                conn.execute(postgresql.insert(chain_heads).values(**values)
                             .on_conflict_do_nothing(index_elements=["identity_hash"]))
            else:  # SQLite's write transaction already holds the whole database
                conn.execute(insert(chain_heads).values(**values))
            head = conn.exec_driver_sql(*query).first()
        return head[0], head[1]

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

    def result_aggregates(self, after_seq: int, until_seq: int, bucket_ns: int,
                          conn: Connection, until_stamp_ns: int | None = None
                          ) -> ResultAggregates:
        """The execution results after_seq < seq <= until_seq (and stamp <= until_stamp_ns)
        grouped by what the rules group and count by: value x count, never one row per
        event. The database groups by small integers (combination, time bucket); the
        combinations are spelled out here. The rollup blocks the range covers whole are
        read from the rollups, the ends of the range from the result rows; a group may
        come in several rows, to be added up. Both parts stream from cursors: iterate
        `outcomes`, then `values`, each once, before any other query on this connection's
        snapshot is needed."""
        ident = self.identity_hash
        rollup = self.store.rollup
        blocks = _whole_blocks(after_seq, until_seq, rollup.block)
        if blocks is None or until_stamp_ns is not None or bucket_ns % rollup.bucket_ns:
            # Nothing to take whole (a short range, a cut in event time, or time buckets the
            # rollup's do not add up to): the result rows alone.
            blocks, ends = None, [(after_seq, until_seq)]
        else:
            size = rollup.block
            ends = [(lo, hi) for lo, hi in ((after_seq, blocks[0] * size),
                                            (blocks[1] * size, until_seq)) if lo < hi]
        stamp = "" if until_stamp_ns is None else " AND stamp_ns <= :ts"
        pieces = []  # (facets WHERE, binds, first and last event id) of each end
        for lo, hi in ends:
            binds = {"ident": ident, "lo": lo, "hi": hi}
            if until_stamp_ns is not None:
                binds["ts"] = until_stamp_ns
            where = f"identity_hash = :ident AND seq > :lo AND seq <= :hi{stamp}"
            id_lo, id_hi = conn.execute(text(
                f"SELECT min(event_id), max(event_id) FROM result_facets WHERE {where}"),
                binds).one()
            if id_lo is not None:
                pieces.append((where, binds, id_lo, id_hi))
        if not pieces and blocks is None:
            return ResultAggregates([], [])
        # A short range (a consolidator's tick) reads the combinations it uses; a long one
        # all of them, kept for the next pass (rows are only added).
        if blocks is None and until_seq - after_seq <= SHORT_RANGE:
            combos = self._combos.for_short_range(conn, pieces[0][0], pieces[0][1])
        else:
            combos = self._combos.committed(conn)
        block_binds = ({"ident": ident, "b_lo": blocks[0], "b_hi": blocks[1]}
                       if blocks else {})

        def grouped_outcomes() -> Iterator[tuple]:
            for where, binds, _, _ in pieces:
                yield from _batched(conn.execute(text(
                    f"SELECT combo_id, {floor_div_sql('stamp_ns', bucket_ns)}, count(*), "
                    f"min(event_id), max(event_id), max(stamp_ns), min(seq) "
                    f"FROM result_facets WHERE {where} GROUP BY 1, 2"), binds))
            if blocks:
                # Straight from the primary key's order when the buckets are the rollup's.
                bucket = floor_div_sql("bucket", bucket_ns // rollup.bucket_ns)
                yield from _batched(conn.execute(text(
                    f"SELECT combo_id, {bucket}, CAST(sum(n) AS BIGINT), min(min_event_id), "
                    "max(max_event_id), max(max_stamp_ns), min(min_seq) FROM result_rollup "
                    "WHERE identity_hash = :ident AND seq_block >= :b_lo AND seq_block < :b_hi "
                    "GROUP BY combo_id, 2"), block_binds))

        def grouped_values() -> Iterator[Sequence]:
            index = " INDEXED BY ix_result_values_event" if conn.dialect.name == "sqlite" else ""
            for _, binds, id_lo, id_hi in pieces:
                yield from conn.execute(text(
                    "SELECT combo_id, source, name, value_repr, count(*), max(event_id), "
                    f"max(stamp_ns) FROM result_values{index} "
                    "WHERE event_id >= :id_lo AND event_id <= :id_hi"
                    f" AND identity_hash = :ident{stamp} GROUP BY 1, 2, 3, 4"),
                    {**binds, "id_lo": id_lo, "id_hi": id_hi}).partitions(5000)
            if blocks:
                yield from conn.execute(text(
                    "SELECT combo_id, source, name, value_repr, CAST(sum(n) AS BIGINT), "
                    "max(max_event_id), max(max_stamp_ns) FROM value_rollup WHERE identity_hash = :ident "
                    "AND seq_block >= :b_lo AND seq_block < :b_hi GROUP BY 1, 2, 3, 4"),
                    block_binds).partitions(5000)

        def values() -> Iterator[ValueBatch]:
            # Run once the outcomes are read, and handed on a batch at a time: at 10^6
            # events they are 10^5 rows, and held together they were a fifth of a pass's
            # peak memory (and left the small-object heap fragmented after it).
            for rows in grouped_values():
                batch = ValueBatch([], [])
                for combo_id, source, name, value, count, max_id, max_stamp in rows:
                    combo = combos.get(combo_id)
                    if combo is None:
                        continue  # another identity's
                    name, value = sys.intern(name), sys.intern(value)
                    skill, target, environment, _zone, success, reason = combo[:6]
                    if source == PARAMETER:
                        batch.parameters.append((skill, target, environment, success, reason,
                                                 name, value, count))
                    elif target:
                        batch.observations.append((target, name, value, count, max_id,
                                                   max_stamp))
                yield batch

        # One int object per time bucket, not one per row: the rules keep them as keys of
        # 10^5 bucket counts at 10^6 events (6 MB of copies of a few dozen numbers).
        buckets: dict[int, int] = {}
        outcomes = ((combo[7] or None, *combo[:7], buckets.setdefault(bucket, bucket), count,
                     min_id, max_id, max_stamp, min_seq)
                    for combo_id, bucket, count, min_id, max_id, max_stamp, min_seq
                    in grouped_outcomes()
                    for combo in (combos[combo_id],))
        return ResultAggregates(outcomes, values())

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

    def latest_payload_json(self, kind: str, conn: Connection) -> tuple[int, int, str] | None:
        """(seq, id, payload as stored) of the newest event of this kind, undecoded: a
        caller that needs a few fields of a large payload parses only those."""
        mark = _placeholder(conn)
        row = conn.exec_driver_sql(
            f"SELECT seq, id, payload_json FROM events WHERE identity_hash = {mark} "
            f"AND kind = {mark} ORDER BY seq DESC LIMIT 1", (self.identity_hash, kind)).first()
        return (row[0], row[1], row[2]) if row else None

    def _latest_seq(self, kind: str, conn: Connection) -> int:
        """seq of the newest event of this kind (0 if none), without reading its payload
        (a run's lists every fact it touched: thousands of keys to decode for one number)."""
        query = (select(events.c.seq)
                 .where(events.c.identity_hash == self.identity_hash, events.c.kind == kind)
                 .order_by(events.c.seq.desc()).limit(1))
        return conn.execute(query).scalar() or 0

    # -- semantic facts ---------------------------------------------------------------
    def facts_by_key(self, keys: set[tuple[str, str]], conn: Connection) -> list[FactRow]:
        """Only the facts with these (kind, key): a pass compares what it touched, not
        the whole table. (Plain DB-API, as _write_states: SQLAlchemy's expanding IN and
        per-row processing were a tenth of an incremental pass.)"""
        found: list[FactRow] = []
        by_kind: dict[str, list[str]] = {}
        for kind, key in keys:
            by_kind.setdefault(kind, []).append(key)
        mark = _placeholder(conn)  # below, .all(): one driver fetch, not one per row
        for kind, kind_keys in sorted(by_kind.items()):
            kind_keys.sort()
            for start in range(0, len(kind_keys), 500):  # stay under bind-parameter limits
                chunk = kind_keys[start:start + 500]
                found += [FactRow(*row[:3], None, *row[3:]) for row in conn.exec_driver_sql(
                    f"SELECT {_FACT_COLUMNS} FROM semantic_facts WHERE identity_hash = {mark}"
                    f" AND fact_kind = {mark} AND fact_key IN ({', '.join([mark] * len(chunk))})",
                    (self.identity_hash, kind, *chunk)).all()]
        return found

    def facts(self, conn: Connection | None = None) -> list[FactRow]:
        query = (select(semantic_facts)
                 .where(semantic_facts.c.identity_hash == self.identity_hash)
                 .order_by(semantic_facts.c.fact_kind, semantic_facts.c.fact_key))
        if conn is None:
            with self.store.read() as own:
                return [fact_from_row(r) for r in own.execute(query)]
        return [fact_from_row(r) for r in conn.execute(query)]

    # -- consolidation state ----------------------------------------------------------
    def consolidation_states(self, kind: str, keys: Iterable[str], conn: Connection
                             ) -> dict[str, str]:
        """Stored state JSON of these keys of one fact kind (the keys that have one)."""
        keys, found = sorted(keys), {}
        mark = _placeholder(conn)
        for start in range(0, len(keys), 500):  # stay under bind-parameter limits
            chunk = keys[start:start + 500]
            found.update(conn.exec_driver_sql(
                "SELECT fact_key, state_json FROM consolidation_state WHERE identity_hash = "
                f"{mark} AND fact_kind = {mark} AND fact_key IN "
                f"({', '.join([mark] * len(chunk))})", (self.identity_hash, kind, *chunk)).all())
        return found

    def all_consolidation_states(self, conn: Connection) -> list[tuple[str, str, str]]:
        """(kind, key, state_json) of every state, in key order (for an archive)."""
        return conn.execute(select(consolidation_state.c.fact_kind,
                                   consolidation_state.c.fact_key,
                                   consolidation_state.c.state_json)
                            .where(consolidation_state.c.identity_hash == self.identity_hash)
                            .order_by(consolidation_state.c.fact_kind,
                                      consolidation_state.c.fact_key)).all()

    def commit_pass(self, expect_run_seq: int, reset: bool,
                    states: list[tuple[str, str, str, bool]], facts: list[FactWrite],
                    new_events: list[NewEvent]) -> list[StoredEvent]:
        """A pass's whole result in ONE transaction: after a reset the derived tier is
        dropped, then the states (kind, key, state_json, already stored), the facts and
        the events (conflicts and the run) are written. Raises ConcurrentPass if a pass
        committed since the one this pass built on (seq expect_run_seq)."""
        with self.store.write() as conn:
            if self._latest_seq(CONSOLIDATION_RUN, conn) != expect_run_seq:
                raise ConcurrentPass("another consolidation pass committed first; retry")
            if reset:  # archived and logged by the override: derived rows only
                for table in (semantic_facts, consolidation_state):
                    conn.execute(delete(table).where(
                        table.c.identity_hash == self.identity_hash))
            self._write_states(conn, states)
            self._write_facts(conn, facts)
            return self.append_in(conn, new_events)

    # Thousands of rows per pass: plain DB-API executemany, without per-row SQLAlchemy
    # parameter processing (a third of a big pass's time otherwise).
    def _write_states(self, conn: Connection, states: list[tuple[str, str, str, bool]]) -> None:
        mark = _placeholder(conn)
        ident = self.identity_hash
        new_rows = [(ident, kind, key, state) for kind, key, state, stored in states
                    if not stored]
        if new_rows:
            conn.exec_driver_sql(
                "INSERT INTO consolidation_state (identity_hash, fact_kind, fact_key, "
                f"state_json) VALUES ({mark}, {mark}, {mark}, {mark})", new_rows)
        changed = [(state, ident, kind, key) for kind, key, state, stored in states if stored]
        if changed:
            conn.exec_driver_sql(
                f"UPDATE consolidation_state SET state_json = {mark} WHERE identity_hash = "
                f"{mark} AND fact_kind = {mark} AND fact_key = {mark}", changed)

    def _write_facts(self, conn: Connection, facts: list[FactWrite]) -> None:
        if not facts:
            return
        mark = _placeholder(conn)
        ident = self.identity_hash
        new_rows = [(ident, *f[1:]) for f in facts if f.row_id is None]
        if new_rows:
            names = ", ".join(["identity_hash", "fact_kind", "fact_key", *_FACT_WRITE_COLUMNS])
            marks = ", ".join([mark] * (3 + len(_FACT_WRITE_COLUMNS)))
            conn.exec_driver_sql(f"INSERT INTO semantic_facts ({names}) VALUES ({marks})",
                                 new_rows)
        updates = [(*f[3:], f.row_id) for f in facts if f.row_id is not None]
        if updates:
            assignments = ", ".join(f"{c} = {mark}" for c in _FACT_WRITE_COLUMNS)
            conn.exec_driver_sql(f"UPDATE semantic_facts SET {assignments} WHERE id = {mark}",
                                 updates)


def _placeholder(conn: Connection) -> str:
    return "?" if conn.dialect.paramstyle == "qmark" else "%s"

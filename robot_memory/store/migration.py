"""Migration of a store written by an older schema version to the current one, as it is
opened (store/opening.py) or by `robot-memory migrate`.

A migration never changes what an event says. Every chain is re-hashed before (a broken
store is not touched) and after, and the upgrade is logged in each chain as a
`schema_migration` event.

1 -> 2: result_facets and result_values, back-filled from the stored execution results.
2 -> 3: result_rollup and value_rollup, summed from result_facets and result_values by
        the database for every filled block; the index ix_result_values_group (which
        they replace) is dropped.
3 -> 4: the rollups clustered by chain block first (schema.py).
4 -> 5: every identity's chain numbered in `chains`; the result index and its rollups
        copied into tables keyed by that number (the same rows otherwise, a few times
        smaller); the events' kind index rebuilt without the execution results; the
        events' two hashes stored as the 32 bytes their hex digits spell (the same
        values: the chain re-hashes to the same head before and after; SQLite, which
        cannot change a column's type, copies the events into a new table to do it).
5 -> 6: request_ids, the acknowledged requests (empty: no older store kept any; opening
        the store created it, as it creates any missing table).
6 -> 7: fleet_segments and fleet_segment_chunks, the segments robots ship to this store
        as their fleet store (empty); intent_events, the intent index (store/intents.py),
        back-filled from the stored execution results and consultations that name an
        intent; the amended attempts (store/amendments.py: empty, no older result names
        an attempt).
A store of any older version goes to the current one in one step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sqlalchemy import insert, select, text, update

from robot_memory.event_kinds import EXECUTION_RESULT, SCHEMA_MIGRATION
from robot_memory.store.chain_check import verify_chain
from robot_memory.store.facets import ComboIds, insert_facets, roll_up_blocks
from robot_memory.store.guards import install_append_only_guards
from robot_memory.store.intents import backfill_intents
from robot_memory.store.log import NewEvent
from robot_memory.store.roles import ROBOT_ROLES_TABLE, security_statements
from robot_memory.store.schema import (SCHEMA_VERSION, RollupShape, amendment_delta_values,
                                       amendment_deltas, chain_heads, chains, events,
                                       fleet_segment_chunks, fleet_segments, intent_events,
                                       result_amendments, result_attempts,
                                       request_ids, result_facets, result_rollup,
                                       result_values, store_info,
                                       value_rollup)
from robot_memory.store.version import (SCHEMA_LOCK_KEY, StoreError, record_rollup_shape,
                                        schema_version)

# Schema versions this code can open: older ones are migrated (migrate_store).
MIGRATABLE_VERSIONS = (1, 2, 3, 4, 5, 6)

# Execution results the 1 -> 2 migration back-fills per statement.
BATCH = 20_000


@dataclass
class MigrationReport:
    from_version: int
    to_version: int = SCHEMA_VERSION
    results_indexed: dict[str, int] = field(default_factory=dict)  # identity -> results
    intents_indexed: dict[str, int] = field(default_factory=dict)  # identity -> events
    events_verified_before: int = 0
    events_verified_after: int = 0
    migration_event_ids: list[int] = field(default_factory=list)

    def summary(self) -> str:
        if self.from_version == self.to_version:
            return f"schema version {self.to_version}: nothing to migrate"
        return (f"migrated schema {self.from_version} -> {self.to_version}: indexed "
                f"{sum(self.results_indexed.values())} execution results of "
                f"{len(self.results_indexed)} identities; chains intact before "
                f"({self.events_verified_before} events re-hashed) and after "
                f"({self.events_verified_after})")


def _verify_all(store, when: str) -> int:
    checked = 0
    for identity in store.identities():
        report = verify_chain(store.partition(identity))
        if not report.ok:
            raise StoreError(f"schema migration refused {when}: {report.describe()}")
        checked += report.events_checked
    return checked


def migrate_store(store, stamp_ns: int | None = None) -> MigrationReport:
    """Bring the store (a MemoryStore) to SCHEMA_VERSION (idempotent: a current store is
    left alone)."""
    with store.read() as conn:
        version = schema_version(conn)
    report = MigrationReport(version)
    if version == SCHEMA_VERSION:
        return report
    if version not in MIGRATABLE_VERSIONS:
        raise StoreError(f"store {store.url}: no migration from schema version {version}")
    report.events_verified_before = _verify_all(store, "before (the store is not intact)")
    stamp = stamp_ns if stamp_ns is not None else time.time_ns()
    with store.write() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
        if schema_version(conn) == SCHEMA_VERSION:  # another process migrated meanwhile
            return MigrationReport(SCHEMA_VERSION)
        identities = list(conn.execute(select(chain_heads.c.identity_hash)
                                       .order_by(chain_heads.c.identity_hash)).scalars())
        if version < 5:
            _to_schema_5(conn, version, identities, store.rollup)
        for table in (request_ids, fleet_segments, fleet_segment_chunks, intent_events,
                      result_attempts, result_amendments, amendment_deltas,
                      amendment_delta_values):
            table.create(conn, checkfirst=True)
        for identity in identities:
            report.results_indexed[identity] = (
                _backfill(conn, identity) if version == 1 else _results_indexed(conn, identity))
            if version < 3:
                _sum_rollups(conn, identity, store.rollup)
            report.intents_indexed[identity] = backfill_intents(conn, identity,
                                                                _chain_of(conn, identity))
        if conn.dialect.name == "postgresql":
            _secure_new_tables(conn)
        conn.execute(update(store_info).where(store_info.c.key == "schema_version")
                     .values(value=str(SCHEMA_VERSION)))
        for identity in identities:
            event = store.partition(identity).append_in(conn, [NewEvent(
                SCHEMA_MIGRATION, {"from_version": version, "to_version": SCHEMA_VERSION,
                                   "results_indexed": report.results_indexed[identity],
                                   "intents_indexed": report.intents_indexed[identity]},
                stamp)])[0]
            report.migration_event_ids.append(event.id)
    report.events_verified_after = _verify_all(
        store, "after (the migration broke a chain; restore the backup)")
    _give_back_space(store)
    return report


def _to_schema_5(conn, version: int, identities: list[str], rollup: RollupShape) -> None:
    """The steps up to schema 5 (chain numbers, digests as bytes, the index keyed by chain
    number, the kind index without results); the back-fill and rollups are the caller's."""
    _number_chains(conn, identities)
    _digests_as_bytes(conn)
    if version < 3:
        record_rollup_shape(conn, rollup)  # the shape asked for when opening
    for table in _INDEX_TABLES if version >= 2 else ():
        if version >= 3 or table in (result_facets, result_values):
            _key_by_chain(conn, table)  # (1 has none; 2 no rollups, summed below)
    _rebuild_kind_index(conn)


def _give_back_space(store) -> None:
    """SQLite: rewrite the file without the pages the old tables left free, so the store
    is as small as schema 5 makes it (the growth guard counts the file) rather than the
    size it had plus a copy. Best effort: another process holding the store open makes
    it wait, then skip; those pages are reused by the next appends anyway."""
    if store.engine.dialect.name != "sqlite":
        return
    raw = store.engine.raw_connection()
    try:
        raw.driver_connection.isolation_level = None  # VACUUM runs outside a transaction
        raw.driver_connection.execute("VACUUM")
    except Exception:  # busy or locked by another process: the space is reused later
        pass
    finally:
        raw.close()


def _chain_of(conn, identity: str) -> int:
    return conn.execute(select(chains.c.chain_id).where(chains.c.identity_hash == identity)
                        ).scalar_one()


def _results_indexed(conn, identity: str) -> int:
    return conn.execute(text("SELECT count(*) FROM result_facets WHERE chain_id = :chain"),
                        {"chain": _chain_of(conn, identity)}).scalar_one()


def _backfill(conn, identity: str) -> int:
    cursor, indexed, combos = 0, 0, ComboIds(identity)
    chain = _chain_of(conn, identity)
    while True:
        batch = conn.execute(select(events.c.id, events.c.seq, events.c.stamp_ns,
                                    events.c.payload_json)
                             .where(events.c.identity_hash == identity,
                                    events.c.kind == EXECUTION_RESULT, events.c.seq > cursor)
                             .order_by(events.c.seq).limit(BATCH)).all()
        indexed += insert_facets(conn, chain, [tuple(row) for row in batch], combos)
        if len(batch) < BATCH:
            return indexed
        cursor = batch[-1][1]


def _sum_rollups(conn, identity: str, rollup: RollupShape) -> None:
    """The rollups of one identity's filled blocks, summed from its result rows by the
    database (as appending them would have)."""
    head = conn.execute(select(chain_heads.c.seq).where(
        chain_heads.c.identity_hash == identity)).scalar_one()
    roll_up_blocks(conn, _chain_of(conn, identity), rollup, 0, head // rollup.block)


# The tables keyed by chain number since schema 5 (by identity hash before).
_INDEX_TABLES = (result_facets, result_values, result_rollup, value_rollup)
# Their indexes before schema 5, by name (2's group index included).
_OLD_INDEXES = ("ix_result_facets_identity_seq", "ix_result_values_event",
                "ix_result_values_group")


def _number_chains(conn, identities: list[str]) -> None:
    """A chain number for every identity that has none (a store before schema 5)."""
    numbered = set(conn.execute(select(chains.c.identity_hash)).scalars())
    for identity in identities:
        if identity not in numbered:
            conn.execute(insert(chains).values(identity_hash=identity))


def _key_by_chain(conn, table) -> None:
    """An index table of schema 2-4 (keyed by identity hash) as schema 5's: a new table
    under the same name, the same rows with the identity's chain number. The same
    statements on both databases, but for the old primary key's name, which PostgreSQL
    keeps beside the table and the new table wants."""
    old = f"{table.name}_v4"
    for index in _OLD_INDEXES:
        conn.execute(text(f"DROP INDEX IF EXISTS {index}"))
    conn.execute(text(f"ALTER TABLE {table.name} RENAME TO {old}"))
    if conn.dialect.name == "postgresql":
        conn.execute(text(f"ALTER INDEX IF EXISTS {table.name}_pkey RENAME TO {old}_pkey"))
    table.create(conn)
    columns = [column.name for column in table.columns]
    picked = ", ".join("c.chain_id" if name == "chain_id" else f"o.{name}" for name in columns)
    conn.execute(text(f"INSERT INTO {table.name} ({', '.join(columns)}) SELECT {picked} "
                      f"FROM {old} o JOIN chains c ON c.identity_hash = o.identity_hash"))
    conn.execute(text(f"DROP TABLE {old}"))


def _digests_as_bytes(conn) -> None:
    """The events' prev_hash and event_hash as schema 5 stores them (schema.Digest): 32
    bytes, decoded from the 64 hex digits of every row. PostgreSQL converts the columns
    in place; SQLite, which cannot change a column's type, copies the rows into a new
    table under the same name, ids and all, with the append-only triggers moved over."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("ALTER TABLE events "
                          "ALTER COLUMN prev_hash TYPE bytea USING decode(prev_hash, 'hex'), "
                          "ALTER COLUMN event_hash TYPE bytea USING decode(event_hash, 'hex')"))
        return
    conn.connection.dbapi_connection.create_function("robot_memory_unhex", 1, bytes.fromhex,
                                                     deterministic=True)
    for trigger in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                        "AND tbl_name = 'events'").scalars().all():
        conn.exec_driver_sql(f"DROP TRIGGER {trigger}")
    for index in ("ix_events_identity_kind_seq", "ix_events_identity_kind_seq_other"):
        conn.exec_driver_sql(f"DROP INDEX IF EXISTS {index}")
    conn.exec_driver_sql("ALTER TABLE events RENAME TO events_v4")
    events.create(conn)
    columns = [column.name for column in events.columns]
    picked = ", ".join(f"robot_memory_unhex({name})" if name in ("prev_hash", "event_hash")
                       else name for name in columns)
    conn.exec_driver_sql(f"INSERT INTO events ({', '.join(columns)}) SELECT {picked} "
                         "FROM events_v4 ORDER BY id")
    conn.exec_driver_sql("DROP TABLE events_v4")
    install_append_only_guards(conn)


def _rebuild_kind_index(conn) -> None:
    """Schema 5's kind index, which leaves the execution results out (schema.py)."""
    conn.execute(text("DROP INDEX IF EXISTS ix_events_identity_kind_seq"))
    for index in events.indexes:
        index.create(conn, checkfirst=True)


def _secure_new_tables(conn) -> None:
    """The grants and row-level security of `db init` again, for the tables this
    migration made, where the store has them (its robot map exists)."""
    if conn.execute(text("SELECT to_regclass(:t)"), {"t": ROBOT_ROLES_TABLE}).scalar():
        for statement in security_statements():
            conn.exec_driver_sql(statement)

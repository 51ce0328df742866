"""Schema upgrades. A migration adds derived columns and tables; it never rewrites an
event. Every chain is re-hashed before (a broken store is not touched) and after, and
the upgrade is logged in each chain as a `schema_migration` event.

1 -> 2: result_facets and result_values, back-filled from the stored execution results.
2 -> 3: result_rollup and value_rollup, summed from result_facets and result_values by
        the database for every filled block; the index ix_result_values_group (which
        they replace) is dropped.
3 -> 4: the rollups clustered by chain block first (schema.py): the same rows, copied
        into the new order (SQLite) or given the new primary key (PostgreSQL).
A store of any older version goes to the current one in one step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sqlalchemy import select, text, update

from robot_memory.event_kinds import EXECUTION_RESULT, SCHEMA_MIGRATION
from robot_memory.store.episodic import (MIGRATABLE_VERSIONS, SCHEMA_LOCK_KEY, MemoryStore,
                                         NewEvent, StoreError, record_rollup_shape)
from robot_memory.store.facets import ComboIds, insert_facets, roll_up_blocks
from robot_memory.store.integrity import verify_chain
from robot_memory.store.schema import (SCHEMA_VERSION, RollupShape, chain_heads, events,
                                       result_rollup, store_info, value_rollup)

BATCH = 20_000


@dataclass
class MigrationReport:
    from_version: int
    to_version: int = SCHEMA_VERSION
    results_indexed: dict[str, int] = field(default_factory=dict)  # identity -> results
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


def _schema_version(conn) -> int:
    return int(conn.execute(select(store_info.c.value).where(
        store_info.c.key == "schema_version")).scalar_one())


def _verify_all(store: MemoryStore, when: str) -> int:
    checked = 0
    for identity in store.identities():
        report = verify_chain(store.partition(identity))
        if not report.ok:
            raise StoreError(f"schema migration refused {when}: {report.describe()}")
        checked += report.events_checked
    return checked


def migrate_store(store: MemoryStore, stamp_ns: int | None = None) -> MigrationReport:
    """Bring the store to SCHEMA_VERSION (idempotent: a current store is left alone)."""
    with store.read() as conn:
        version = _schema_version(conn)
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
        if _schema_version(conn) == SCHEMA_VERSION:  # another process migrated meanwhile
            return MigrationReport(SCHEMA_VERSION)
        identities = list(conn.execute(select(chain_heads.c.identity_hash)
                                       .order_by(chain_heads.c.identity_hash)).scalars())
        if version < 3:
            record_rollup_shape(conn, store.rollup)  # the shape asked for when opening
        else:
            _recluster_rollups(conn)
        if version == 2:
            conn.execute(text("DROP INDEX IF EXISTS ix_result_values_group"))
        for identity in identities:
            report.results_indexed[identity] = (
                _backfill(conn, identity) if version == 1 else _results_indexed(conn, identity))
            if version < 3:
                _sum_rollups(conn, identity, store.rollup)
        conn.execute(update(store_info).where(store_info.c.key == "schema_version")
                     .values(value=str(SCHEMA_VERSION)))
        for identity in identities:
            event = store.partition(identity).append_in(conn, [NewEvent(
                SCHEMA_MIGRATION, {"from_version": version, "to_version": SCHEMA_VERSION,
                                   "results_indexed": report.results_indexed[identity]},
                stamp)])[0]
            report.migration_event_ids.append(event.id)
    report.events_verified_after = _verify_all(
        store, "after (the migration broke a chain; restore the backup)")
    return report


def _sum_rollups(conn, identity: str, rollup: RollupShape) -> None:
    """The rollups of one identity's filled blocks, summed from its result rows by the
    database (as appending them would have)."""
    head = conn.execute(select(chain_heads.c.seq).where(
        chain_heads.c.identity_hash == identity)).scalar_one()
    roll_up_blocks(conn, identity, rollup, 0, head // rollup.block)


def _recluster_rollups(conn) -> None:
    """Schema 3's rollups in schema 4's primary key order (the rows unchanged)."""
    for table in (result_rollup, value_rollup):
        key = table.primary_key
        if conn.dialect.name == "postgresql":  # a heap: only its key index changes
            # Schema 3's key had PostgreSQL's default name, which schema 4's keeps.
            conn.execute(text(f"ALTER TABLE {table.name} DROP CONSTRAINT {key.name}"))
            conn.execute(text(f"ALTER TABLE {table.name} ADD CONSTRAINT {key.name} PRIMARY KEY "
                              f"({', '.join(column.name for column in key.columns)})"))
            continue
        # SQLite keeps a WITHOUT ROWID table in its key's order: a new table, the same rows.
        conn.execute(text(f"ALTER TABLE {table.name} RENAME TO {table.name}_v3"))
        table.create(conn)
        conn.execute(text(f"INSERT INTO {table.name} SELECT * FROM {table.name}_v3"))
        conn.execute(text(f"DROP TABLE {table.name}_v3"))


def _results_indexed(conn, identity: str) -> int:
    return conn.execute(text("SELECT count(*) FROM result_facets WHERE identity_hash = :ident"),
                        {"ident": identity}).scalar_one()


def _backfill(conn, identity: str) -> int:
    cursor, indexed, combos = 0, 0, ComboIds(identity)
    while True:
        batch = conn.execute(select(events.c.id, events.c.seq, events.c.stamp_ns,
                                    events.c.payload_json)
                             .where(events.c.identity_hash == identity,
                                    events.c.kind == EXECUTION_RESULT, events.c.seq > cursor)
                             .order_by(events.c.seq).limit(BATCH)).all()
        indexed += insert_facets(conn, [tuple(row) for row in batch], combos)
        if len(batch) < BATCH:
            return indexed
        cursor = batch[-1][1]

"""Opening the store: `MemoryStore` connects to a SQLAlchemy URL and, on first use,
creates the tables and the triggers that keep the log append-only; a store of an older
schema version is migrated to the current one as it is opened (store/migration.py).
"""

from __future__ import annotations

from sqlalchemy import Connection, insert, inspect, make_url, select, text

from robot_memory.store.engine import create_store_engine
from robot_memory.store.guards import guards_installed, install_append_only_guards
from robot_memory.store.migration import MIGRATABLE_VERSIONS, migrate_store
from robot_memory.store.partition import Partition
from robot_memory.store.schema import (SCHEMA_VERSION, RollupShape, chain_heads, metadata,
                                       store_info)
from robot_memory.store.version import (SCHEMA_LOCK_KEY, StoreError, give_store_id,
                                        record_rollup_shape, rollup_shape_of, store_id_of)


def _without_password(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


def _all_tables_exist(conn: Connection) -> bool:
    return set(metadata.tables) <= set(inspect(conn).get_table_names())


class MemoryStore:
    """Opens (and on first use creates) the store at a SQLAlchemy URL."""

    def __init__(self, url: str, *, synchronous: str = "NORMAL", migrate: bool = True,
                 rollup: RollupShape = RollupShape(), keep_open: bool = False):
        """rollup: the shape of the rollups, for a store created or migrated by this open
        (an existing store keeps the shape it was created or migrated with).

        keep_open: for a long-lived process (the consolidator node) that checkpoints the
        SQLite write-ahead log itself, when it is idle (checkpoint_log): one idle
        connection is held until close(), and this store's commits do not checkpoint.
        Otherwise SQLite copies the log back into the database file and syncs it when its
        LAST connection closes (NullPool: every transaction's own connection, when no
        other process has the store open) or in the commit that leaves the log over 1000
        pages: a pass would end by copying back what it just wrote (a noticeable share of
        an incremental pass: docs/performance.md, "Why the code is shaped this way").
        Commits are what they were: a committed transaction is in the log, and a crash
        keeps it whole or drops it whole."""
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
            give_store_id(conn)
        if version is not None and int(version) != SCHEMA_VERSION:
            self.migration = migrate_store(self)
        with self.read() as conn:
            self.rollup = rollup_shape_of(conn)
            # Which store this is, whatever URL reached it: nodes that must share one
            # compare it (an older store whose owner has not opened it yet: its URL).
            self.store_id = store_id_of(conn) or f"url:{_without_password(url)}"
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

"""Engine creation: SQLite (WAL, immediate write transactions) or PostgreSQL."""

from __future__ import annotations

from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy.pool import NullPool


def create_store_engine(url: str, synchronous: str = "NORMAL",
                        auto_checkpoint: bool = True) -> Engine:
    """An engine whose `.execution_options(write=True)` connections take the write lock
    at BEGIN, so two processes appending to one chain serialise instead of deadlocking.
    auto_checkpoint=False: its commits leave the write-ahead log as it is (SQLite's
    auto-checkpoint copies it back to the database file once it is over 1000 pages);
    the owner checkpoints it itself (MemoryStore.checkpoint_log)."""
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)

    # How long to wait for another connection's lock: `?timeout=SECONDS` (pysqlite's own
    # URL option), 30 s by default; then SQLite says "database is locked".
    timeout_s = float(make_url(url).query.get("timeout", 30))
    # NullPool: a fresh connection per use keeps forked/threaded callers independent.
    engine = create_engine(url, poolclass=NullPool, connect_args={"timeout": timeout_s})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):
        # Let SQLAlchemy's begin event issue BEGIN itself (pysqlite's own is deferred).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
        if not auto_checkpoint:
            cursor.execute("PRAGMA wal_autocheckpoint=0")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection):
        write = connection.get_execution_options().get("write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine

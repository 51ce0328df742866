"""How big the store is, for the growth guard (the Long-Term Memory & Knowledge
Consolidation Protocol Spec v0.1 sets 100 MB)."""

from __future__ import annotations

import os

from sqlalchemy import text

from robot_memory.store.integrity import sqlite_path
from robot_memory.store.opening import MemoryStore
from robot_memory.store.schema import fleet_segment_chunks, fleet_segments, metadata

# The segments robots shipped here are the fleet's history, not this store's live part:
# the growth guard does not count them (they are off every robot by design).
_NOT_LIVE = {fleet_segments.name, fleet_segment_chunks.name}

MB = 1024 * 1024


def store_size_bytes(store: MemoryStore) -> int:
    """SQLite: the database file plus its write-ahead log. PostgreSQL: our tables with
    their indexes (a fleet database may hold other things), but the segments shipped to
    it as a fleet store."""
    path = sqlite_path(store.url)
    if path is not None:
        return sum(_size_or_zero(p) for p in (path, path + "-wal"))
    if store.engine.dialect.name == "postgresql":
        with store.read() as conn:
            return int(sum(conn.execute(text("SELECT pg_total_relation_size(:t)"),
                                        {"t": name}).scalar() or 0
                           for name in metadata.tables if name not in _NOT_LIVE))
    return 0


def store_files(store: MemoryStore) -> dict[str, int]:
    """A SQLite store's files on disk, by role: "database", its write-ahead log "wal" and
    its shared-memory index "shm" (a file missing counts 0). Empty for a server database,
    which is not on the robot's disk."""
    path = sqlite_path(store.url)
    if path is None:
        return {}
    return {"database": _size_or_zero(path), "wal": _size_or_zero(path + "-wal"),
            "shm": _size_or_zero(path + "-shm")}


def write_ahead_log_bytes(store: MemoryStore) -> int:
    """The size of a SQLite store's write-ahead log (0 on PostgreSQL, or with no log)."""
    path = sqlite_path(store.url)
    return _size_or_zero(path + "-wal") if path is not None else 0


def _size_or_zero(path: str) -> int:
    """A file that may vanish at any moment: SQLite deletes the WAL when the last
    connection closes, between any exists() and getsize() we could do."""
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0

"""Disk full, made real with SQLite's max_page_count: the append fails with a clear
error, leaves no partial event, and works again once there is space."""

import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from robot_memory.store import MemoryStore, NewEvent, verify_chain

A = "a" * 64


def cap_pages(store: MemoryStore, pages: int | None) -> None:
    """Every new connection of this store sees a file that cannot grow past `pages`."""
    def on_connect(dbapi_connection, _record):
        if pages is not None:
            dbapi_connection.execute(f"PRAGMA max_page_count={pages}")
    event.listen(store.engine, "connect", on_connect)


def test_disk_full_refuses_the_whole_batch_and_recovers(tmp_path):
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    MemoryStore(url).partition(A).append_many([NewEvent("k", {"i": i}, i) for i in range(5)])
    full = MemoryStore(url)
    with full.read() as conn:
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar()
    cap_pages(full, pages)
    batch = [NewEvent("k", {"i": i, "blob": "x" * 3000}, i) for i in range(5, 50)]
    with pytest.raises(OperationalError, match="database or disk is full"):
        full.partition(A).append_many(batch)
    part = MemoryStore(url).partition(A)
    assert part.count_events() == 5 and part.head()[0] == 5  # nothing partial
    assert verify_chain(part).ok
    part.append_many(batch)  # space is back (no cap on this store's connections)
    assert part.count_events() == 50 and verify_chain(part).ok

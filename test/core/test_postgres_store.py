"""The fleet store on a real PostgreSQL server (started by the test session on
loopback): the same chain, the same refusals, the same knowledge as on SQLite, with
several processes writing at once."""

import multiprocessing

import pytest
from helpers import varied_events
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from robot_memory.consolidation.consolidation_pass import consolidation_pass, facts_snapshot
from robot_memory.store import MemoryStore, NewEvent, check_store, verify_chain

A, B = "a" * 64, "b" * 64


def test_chain_per_identity_and_the_boot_check(pg_url):
    store = MemoryStore(pg_url)
    a, b = store.partition(A), store.partition(B)
    a.append_many([NewEvent("execution_result", {"i": i}, i) for i in range(30)])
    b.append("execution_result", {"i": -1}, 5)
    assert [e.seq for e in a.events()] == list(range(1, 31))
    assert [e.payload for e in b.events()] == [{"i": -1}]
    assert store.identities() == [A, B]
    assert verify_chain(a).ok and verify_chain(b).ok
    verdict = check_store(pg_url, A, record=True)
    assert verdict.ok, verdict.lines
    assert check_store(pg_url, full=True).ok
    store.close()


@pytest.mark.parametrize("statement", ["UPDATE events SET payload_json = '{}' WHERE seq = 1",
                                       "DELETE FROM events WHERE seq = 1",
                                       "TRUNCATE events"])
def test_the_server_refuses_to_rewrite_the_log(pg_url, statement):
    store = MemoryStore(pg_url)
    part = store.partition(A)
    part.append_many([NewEvent("k", {"i": i}, i) for i in range(3)])
    # A superuser console, not robot_memory's code: the triggers still refuse.
    with pytest.raises(DBAPIError, match="append-only"), store.engine.begin() as conn:
        conn.execute(text(statement))
    assert [e.payload["i"] for e in part.events()] == [0, 1, 2]
    assert verify_chain(part).ok
    store.close()


def test_an_edit_made_behind_the_triggers_is_named(pg_url):
    store = MemoryStore(pg_url)
    part = store.partition(A)
    part.append_many([NewEvent("k", {"i": i}, i) for i in range(6)])
    engine = create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE events DISABLE TRIGGER USER"))
        conn.exec_driver_sql("UPDATE events SET payload_json = '{\"i\":99}' WHERE seq = 4")
        conn.execute(text("ALTER TABLE events ENABLE TRIGGER USER"))
        bad_id = conn.execute(text("SELECT id FROM events WHERE seq = 4")).scalar()
    engine.dispose()
    report = verify_chain(part)
    assert not report.ok and report.bad_seq == 4 and "edited" in report.reason
    verdict = check_store(pg_url, A, full=True)
    assert not verdict.ok and f"events.id {bad_id}" in " ".join(verdict.lines)
    store.close()


def _append_batches(url: str, identity: str, writer: int, batches: int) -> None:
    store = MemoryStore(url)
    part = store.partition(identity)
    for b in range(batches):
        part.append_many([NewEvent("execution_result", {"writer": writer, "b": b, "j": j},
                                   b * 10 + j) for j in range(3)])
    store.close()


def test_concurrent_writers_from_several_processes_keep_one_chain(pg_url):
    """Four processes open a brand-new database and append to the same identity (and one
    to another) at once: no lost, duplicated or forked event."""
    context = multiprocessing.get_context("spawn")
    jobs = [context.Process(target=_append_batches, args=(pg_url, A, w, 40)) for w in range(4)]
    jobs.append(context.Process(target=_append_batches, args=(pg_url, B, 9, 40)))
    for job in jobs:
        job.start()
    for job in jobs:
        job.join(120)
        assert job.exitcode == 0
    store = MemoryStore(pg_url)
    a = list(store.partition(A).events())
    assert [e.seq for e in a] == list(range(1, 4 * 40 * 3 + 1))
    assert sorted((e.payload["writer"], e.payload["b"], e.payload["j"]) for e in a) == \
        sorted((w, b, j) for w in range(4) for b in range(40) for j in range(3))
    assert verify_chain(store.partition(A)).ok and verify_chain(store.partition(B)).ok
    assert store.partition(B).count_events() == 40 * 3
    store.close()


def test_consolidation_gives_the_same_knowledge_as_on_sqlite(pg_url, db_url):
    snapshots = []
    for url in (db_url, pg_url):
        store = MemoryStore(url)
        part = store.partition(A)
        events = varied_events(600)
        part.append_many(events[:250])
        consolidation_pass(part)
        part.append_many(events[250:])
        consolidation_pass(part)
        assert consolidation_pass(part).facts_touched == 0  # a second pass writes nothing
        snapshots.append(facts_snapshot(part))
        assert store.partition(B).facts() == []
        store.close()
    assert snapshots[0] == snapshots[1] and len(snapshots[0]) > 1000

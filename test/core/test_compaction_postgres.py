"""Compaction on a real PostgreSQL server (started by the test session on loopback):
the facts equal an uncompacted store's, the server lets a compaction's deletes through
and refuses any other, and tampering is found as on SQLite."""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from robot_memory.retention.archives import verify_archives
from robot_memory.retention.compaction import compact, compactable_until
from robot_memory.consolidation import consolidation_pass, facts_snapshot
from robot_memory.event_kinds import COMPACTION
from robot_memory.store import MemoryStore, boot_check, verify_chain
from test_compaction import CONFIG, IDENT, provenance, stream


@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), cuts=st.lists(st.floats(0.0, 1.0), min_size=3,
                                                 max_size=3))
def test_facts_after_compactions_equal_the_uncompacted_store(pg_server, tmp_path_factory,
                                                             seed, cuts):
    where = tmp_path_factory.mktemp("pgcmp")
    stores = [MemoryStore(pg_server.new_database()) for _ in range(2)]
    live, whole = (store.partition(IDENT) for store in stores)
    t = 1000.0
    for number, cut in enumerate(cuts):
        events = stream(seed + number, random.Random(seed + number).randint(20, 80), t)
        t += len(events)
        for partition in (live, whole):
            partition.append_many(events)
            consolidation_pass(partition, CONFIG, stamp_ns=int(t * 1e9))
        report = compact(live, int(compactable_until(live) * cut), where,
                         stamp_ns=int(t * 1e9))
        if report.compaction is not None:
            whole.append(COMPACTION, report.compaction.payload(), int(t * 1e9))
    for partition in (live, whole):
        consolidation_pass(partition, CONFIG, stamp_ns=int((t + 1) * 1e9))
    try:
        assert facts_snapshot(live) == facts_snapshot(whole)
        assert provenance(live) == provenance(whole)
        assert verify_chain(live).ok and boot_check(live).ok
        assert verify_archives(live, where).ok
    finally:
        for store in stores:
            store.close()


def test_the_server_refuses_deletes_outside_a_compaction_and_verify_finds_them(pg_url,
                                                                               tmp_path):
    store = MemoryStore(pg_url)
    partition = store.partition(IDENT)
    partition.append_many(stream(1, 120, 1000.0))
    consolidation_pass(partition, CONFIG)
    assert compact(partition, 60, tmp_path).compaction.until_seq == 60
    partition.append_many(stream(2, 30, 2000.0))
    with pytest.raises(DBAPIError, match="append-only"), store.engine.begin() as conn:
        conn.execute(text("DELETE FROM events WHERE seq = 100"))
    engine = create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE events DISABLE TRIGGER USER"))
        conn.execute(text("DELETE FROM events WHERE seq = 100"))
        conn.execute(text("ALTER TABLE events ENABLE TRIGGER USER"))
    engine.dispose()
    report = verify_chain(partition)
    assert not report.ok and report.bad_seq == 100 and "missing" in report.reason
    store.close()

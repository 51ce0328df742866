"""The fleet database goes away under a running stack (a PostgreSQL restart): results
keep being accepted and are written when it returns, acknowledged writes say they
failed, and no node dies."""

import pytest

from robot_memory.event_kinds import EXECUTION_RESULT
from robot_memory.srv import RecordEvent
from robot_memory.store import MemoryStore, verify_chain

from ros.conftest import wait_until
from ros.test_governance import record, result, wait_active


@pytest.fixture
def db_url(own_pg_server):
    return own_pg_server.new_database()


def stored_results(db_url, identity):
    store = MemoryStore(db_url)
    try:
        return [e.payload["intent_id"] for e in store.partition(identity).events(
            [EXECUTION_RESULT])]
    finally:
        store.close()


def test_results_survive_a_database_restart(probe, start_stack, own_pg_server,
                                            certified_hash, db_url):
    stack = start_stack(period_s=0.5)
    probe.wait_identity()
    wait_active(probe)
    probe.wait_logger()
    for i in range(10):
        probe.publish_result(stamp_s=100 + i, intent_id=f"before-{i}")
    wait_until(lambda: len(stored_results(db_url, certified_hash)) == 10, 30,
               "the first results in the database")

    own_pg_server.stop()
    for i in range(10):
        probe.publish_result(stamp_s=200 + i, intent_id=f"during-{i}")
    wait_until(lambda: int(probe.diagnostics.get("episodic_logger", {}).get("pending", 0))
               >= 10, 30, "the logger to hold the results it could not write")
    refused = record(probe, result(300, intent_id="acked-during"))
    assert not refused.accepted
    assert refused.reason_code == RecordEvent.Response.REASON_STORE_ERROR, refused.reason

    own_pg_server.start()
    wait_until(lambda: len(stored_results(db_url, certified_hash)) == 20, 60,
               "the held results to be written once the database is back")
    assert record(probe, result(400, intent_id="acked-after")).accepted
    intents = stored_results(db_url, certified_hash)
    assert intents[:10] == [f"before-{i}" for i in range(10)]
    assert sorted(intents[10:20]) == sorted(f"during-{i}" for i in range(10))
    assert intents[20:] == ["acked-after"]  # the refused one is not there, nothing twice
    store = MemoryStore(db_url)
    assert verify_chain(store.partition(certified_hash)).ok
    store.close()
    for name, process in stack.processes.items():
        assert process.poll() is None, f"{name} died during the outage"

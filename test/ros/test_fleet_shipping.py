"""A consolidator with fleet_store_url ships each segment it compacts to the fleet's
PostgreSQL and receipts it in the robot's log, and /diagnostics says so. Real node
processes over DDS, a real SQLite file, a real PostgreSQL server on loopback."""

import time

from robot_memory.event_kinds import SEGMENT_SHIPPED
from robot_memory.retention.compaction import default_archive_dir
from robot_memory.retention.shipping import shipped_segments
from robot_memory.store import MemoryStore, compactions

from ros.conftest import wait_until

RESULTS = 600


def consolidator(probe) -> dict:
    return probe.diagnostics.get("consolidator", {})


def test_the_consolidator_ships_what_it_compacts_with_receipts(probe, start_stack,
                                                               certified_hash, db_url, pg_url):
    MemoryStore(pg_url).close()  # the fleet store's tables (its owner's `db init`)
    start_stack(retain_events=100, compact_every_events=100, fleet_store_url=pg_url)
    probe.wait_identity()
    probe.wait_logger()
    for i in range(RESULTS):
        probe.publish_result(stamp_s=1000 + i, target_class=f"cup_{i % 4}",
                             success=i % 3 != 0, failure_reason="" if i % 3 else "slipped")
        if i % 100 == 99:
            time.sleep(0.05)
    wait_until(lambda: probe.diagnostics.get("episodic_logger", {}).get("written")
               == str(RESULTS), 60, f"{RESULTS} results written")
    wait_until(lambda: int(consolidator(probe).get("segments_shipped", 0)) >= 1
               and consolidator(probe).get("segments_pending") == "0", 60,
               lambda: f"a segment shipped: {consolidator(probe)}")
    values = consolidator(probe)
    assert values["fleet_store"] == pg_url and values["shipping_last_error"] == ""
    store = MemoryStore(db_url)
    try:
        partition = store.partition(certified_hash)
        with store.read() as conn:
            found = compactions(certified_hash, conn)
        shipped = shipped_segments(partition)
        assert found and shipped == {c.segment: c.segment_sha256 for c in found}
        receipts = list(partition.events(kinds=[SEGMENT_SHIPPED]))
        assert {r.payload["destination"] for r in receipts} == {pg_url}
        for receipt in receipts:  # the bytes the robot's own copy has
            own = default_archive_dir(db_url) / receipt.payload["segment"]
            assert receipt.payload["bytes"] == own.stat().st_size
    finally:
        store.close()

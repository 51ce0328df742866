"""Bounded out of the box: the consolidator compacts what it has folded beyond
retain_events into archive segments beside the database, and the live store and its
segments still verify; its /diagnostics show the disk budget's parts, and learning
pauses when the budget cannot be held. Real node processes over DDS, a real SQLite
file."""

import time

from robot_memory.retention.archives import verify_archives
from robot_memory.retention.compaction import default_archive_dir
from robot_memory.store import MemoryStore, verify_chain

from ros.conftest import wait_until

RESULTS = 1200


def consolidator(probe) -> dict:
    return probe.diagnostics.get("consolidator", {})


def test_the_consolidator_compacts_history_beyond_retain_events(probe, start_stack,
                                                                certified_hash, db_url):
    start_stack(retain_events=300, compact_every_events=200)
    probe.wait_identity()
    probe.wait_logger()
    # In two halves, each waited for: one compaction folds everything beyond
    # retain_events that a pass has read, so results that all arrive before the first pass
    # would make a single compaction.
    for half in range(2):
        for i in range(half * RESULTS // 2, (half + 1) * RESULTS // 2):
            probe.publish_result(stamp_s=1000 + i, target_class=f"cup_{i % 4}",
                                 success=i % 3 != 0, failure_reason="" if i % 3 else "slipped")
            if i % 100 == 99:
                time.sleep(0.05)
        written = (half + 1) * RESULTS // 2
        wait_until(lambda: probe.diagnostics.get("episodic_logger", {}).get("written")
                   == str(written), 60, f"{written} results written")
        # Each compaction takes at least compact_every_events positions.
        wait_until(lambda: int(consolidator(probe).get("compactions", 0)) >= half + 1, 60,
                   lambda: f"{half + 1} compaction(s): {consolidator(probe)}")
    assert consolidator(probe)["archive_dir"] == str(default_archive_dir(db_url))
    # The default disk budget holds: its parts shown, a share of it in use.
    assert float(consolidator(probe)["disk.segments_mb"]) > 0
    assert 0 < float(consolidator(probe)["disk_budget_used"]) < 1
    store = MemoryStore(db_url)
    try:
        partition = store.partition(certified_hash)
        assert partition.count_events("execution_result") <= RESULTS - 400
        assert verify_chain(partition).ok
        archives = verify_archives(partition, default_archive_dir(db_url))
        assert archives.ok and archives.segments >= 2, archives.describe()
        assert partition.facts()
    finally:
        store.close()


def test_the_consolidator_shows_its_disk_budget_and_pauses_learning_over_it(
        probe, start_stack, certified_hash, db_url):
    # A budget smaller than the live store's own file: nothing the policy may delete
    # can hold it, so learning pauses, while the logger goes on storing results.
    start_stack(disk_budget_mb=0.01)
    probe.wait_identity()
    probe.wait_logger()
    for i in range(40):
        probe.publish_result(stamp_s=1000 + i, target_class=f"cup_{i % 2}")
    wait_until(lambda: probe.diagnostics.get("episodic_logger", {}).get("written") == "40", 60,
               "40 results written")
    wait_until(lambda: int(consolidator(probe).get("disk_budget_paused_passes", 0)) >= 2, 60,
               lambda: f"passes paused for the disk budget: {consolidator(probe)}")
    values = consolidator(probe)
    for part in ("live_store", "write_ahead_log", "shared_memory", "segments",
                 "other_archive_files", "witness"):
        assert f"disk.{part}_mb" in values, values
    assert float(values["disk.live_store_mb"]) > 0 and float(values["disk_budget_used"]) > 1
    assert values["disk_budget_mb"] == "0.01" and values["passes"] == "0"
    level, message = probe.statuses["consolidator"]
    assert level == 1 and message.startswith("disk budget exceeded, learning paused"), message
    assert "live store" in message and "disk_budget_mb" in message
    store = MemoryStore(db_url)
    try:  # acknowledged results are kept; no fact was learned while paused
        partition = store.partition(certified_hash)
        assert partition.count_events("execution_result") == 40
        assert partition.facts() == [] and verify_chain(partition).ok
    finally:
        store.close()

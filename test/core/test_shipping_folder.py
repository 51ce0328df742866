"""Shipping sealed segments to a mounted folder: each segment is copied, re-hashed there
and receipted in the robot's log; a damaged copy is never taken for shipped; the whole
chain verifies from the live store plus the folder's copies once the robot's own are
gone; and the shipper resumes from its receipts. A real SQLite file, real files."""

import subprocess
import sys

from robot_memory.consolidation import consolidation_pass
from robot_memory.event_kinds import SEGMENT_SHIPPED
from robot_memory.retention.archives import verify_archives
from robot_memory.retention.compaction import compact, compactable_until
import pytest

from robot_memory.retention.destinations import (FolderDestination, ShippingError,
                                                 destination_from_url)
from robot_memory.retention.fleet_history import gather_segments
from robot_memory.retention.shipping import (Shipper, pending_segments, receipts,
                                             shipped_segments)
from robot_memory.store import MemoryStore, compactions
from test_compaction import CONFIG, IDENT, stream


def verify_from_the_fleet(where, fleet):
    """`robot-memory verify --full` of the store in `where`, its archive folder and the
    fleet folder: it passes, with the three segments fetched and intact; its run."""
    done = subprocess.run([sys.executable, "-m", "robot_memory.cli", "verify", "--full",
                           "--db", f"sqlite:///{where / 'memory.db'}", "--archives",
                           str(where / "segments"), "--fleet", str(fleet)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 fetched from the fleet store" in done.stdout
    assert "3 archive segment(s) intact" in done.stdout
    return done


def compacted_store(where, rounds=3):
    """A robot's SQLite store with `rounds` compactions, their segments in where/segments."""
    store = MemoryStore(f"sqlite:///{where / 'memory.db'}")
    partition = store.partition(IDENT)
    t = 1000.0
    for number in range(rounds):
        partition.append_many(stream(number, 80, t))
        t += 80
        consolidation_pass(partition, CONFIG, stamp_ns=int(t * 1e9))
        assert compact(partition, compactable_until(partition) - 10, where / "segments",
                       stamp_ns=int(t * 1e9)).compaction is not None
    return store, partition


def test_segments_ship_to_a_folder_with_receipts_and_verify_from_there(tmp_path):
    store, partition = compacted_store(tmp_path)
    fleet = tmp_path / "fleet"
    destination = destination_from_url(f"file://{fleet}")
    assert isinstance(destination, FolderDestination)
    shipper = Shipper(destination, tmp_path / "segments", backoff_cap_s=2, time_limit_s=60)
    with store.read() as conn:
        found = compactions(IDENT, conn)
    assert len(pending_segments(partition)) == 3 and shipped_segments(partition) == {}

    done = shipper.run(partition, lambda: 5)
    assert done.error == "" and done.pending == 0 and len(done.shipped) == 3
    for c in found:
        copy = fleet / IDENT / c.segment
        assert copy.read_bytes() == (tmp_path / "segments" / c.segment).read_bytes()
        receipt = receipts(partition)[c.segment]
        assert (receipt.sha256, receipt.destination, receipt.size_bytes) == \
            (c.segment_sha256, f"file://{fleet}", copy.stat().st_size)
    assert shipped_segments(partition) == {c.segment: c.segment_sha256 for c in found}
    assert not list(fleet.rglob("*.partial"))
    # Resumes from the receipts: nothing is shipped or receipted twice.
    assert shipper.run(partition, lambda: 6).shipped == []
    assert partition.count_events(SEGMENT_SHIPPED) == 3

    for c in found:  # the robot's own copies gone: the folder's are the history
        (tmp_path / "segments" / c.segment).unlink()
    assert not verify_archives(partition, tmp_path / "segments").ok
    gathered = gather_segments(partition, tmp_path / "segments", destination,
                               tmp_path / "gathered")
    assert (gathered.local, len(gathered.fetched), gathered.missing) == (0, 3, [])
    report = verify_archives(partition, tmp_path / "gathered")
    assert report.ok and report.segments == 3, report.describe()
    store.close()
    verify_from_the_fleet(tmp_path, fleet)


def test_a_damaged_or_partial_copy_in_the_folder_is_not_taken_for_shipped(tmp_path):
    store, partition = compacted_store(tmp_path, rounds=1)
    (tmp_path / "second").mkdir()
    fleet = tmp_path / "fleet"
    c = pending_segments(partition)[0]
    own = tmp_path / "segments" / c.segment
    (fleet / IDENT).mkdir(parents=True)
    # What a copy cut off by a full share or a lost mount would leave.
    (fleet / IDENT / c.segment).write_bytes(own.read_bytes()[:-40])
    destination = FolderDestination(fleet)
    assert destination.confirm(IDENT, c.segment, c.segment_sha256) is None
    assert not destination.fetch(IDENT, c.segment, c.segment_sha256, tmp_path / "x")
    assert receipts(partition) == {}
    done = Shipper(destination, tmp_path / "segments", backoff_cap_s=2,
                   time_limit_s=60).run(partition, lambda: 7)
    assert done.error == "" and [r.segment for r in done.shipped] == [c.segment]
    assert (fleet / IDENT / c.segment).read_bytes() == own.read_bytes()

    # A segment whose file no longer matches its compaction is refused, not shipped.
    store2, partition2 = compacted_store(tmp_path / "second", rounds=1)
    c2 = pending_segments(partition2)[0]
    path = tmp_path / "second" / "segments" / c2.segment
    edited = bytearray(path.read_bytes())  # one byte changed (the file is compressed)
    edited[len(edited) // 2] ^= 0xFF
    path.write_bytes(bytes(edited))
    shipper = Shipper(FolderDestination(tmp_path / "fleet2"), tmp_path / "second" / "segments",
                      backoff_cap_s=2,
                      time_limit_s=60, clock=lambda: 100.0)
    failed = shipper.run(partition2, lambda: 8)
    assert failed.shipped == [] and failed.pending == 1
    assert "does not hash to what its compaction recorded" in failed.error
    assert receipts(partition2) == {} and shipper.failures == 1
    assert 0.5 <= shipper.retry_in_s() <= 1.0  # the first backoff, with its jitter
    assert shipper.run(partition2, lambda: 9) is None  # not due yet
    store.close()
    store2.close()


def test_backoff_doubles_up_to_its_cap():
    shipper = Shipper(FolderDestination("/nonexistent"), "/nonexistent", backoff_cap_s=10,
                      time_limit_s=1, seed="robot_a")
    waits = []
    for failures in range(1, 9):
        shipper.failures = failures
        waits.append(shipper.backoff_s())
    bases = [1, 2, 4, 8, 10, 10, 10, 10]
    assert all(base / 2 <= wait <= base for wait, base in zip(waits, bases)), waits
    again = Shipper(FolderDestination("/nonexistent"), "/nonexistent", backoff_cap_s=10,
                    time_limit_s=1, seed="robot_a")
    again.failures = 1
    assert again.backoff_s() == waits[0]  # seeded: the same robot, the same jitter


@pytest.mark.parametrize("url", ["mysql://robot:hunter2@db/fleet", "not a url :hunter2@",
                                 "relative/folder"])
def test_a_fleet_store_url_that_is_neither_postgresql_nor_a_folder_is_refused(url):
    with pytest.raises(ShippingError) as refused:
        destination_from_url(url)
    assert refused.value.field == "fleet_store_url"
    assert "hunter2" not in str(refused.value)


def test_segments_the_budget_forgot_after_shipping_verify_from_the_fleet(tmp_path):
    """The disk budget forgets shipped segments first (on the record); the fleet still
    holds them, so the whole chain re-hashes and the tier re-derives from the live store
    plus the fleet's copies, while a segment forgotten without a receipt stays skipped."""
    from robot_memory.retention.budget import SHIPPED, hold_budget
    store, partition = compacted_store(tmp_path)
    fleet = tmp_path / "fleet"
    shipper = Shipper(FolderDestination(fleet), tmp_path / "segments", backoff_cap_s=2,
                      time_limit_s=60)
    assert len(shipper.run(partition, lambda: 5).shipped) == 3
    held = hold_budget(partition, tmp_path / "segments", 1, shipping_configured=True,
                       stamp_ns=6)
    assert [d.reason for d in held.forgotten] == [SHIPPED] * 3
    assert not list((tmp_path / "segments").glob("*.segment*"))
    local = verify_archives(partition, tmp_path / "segments")
    assert local.ok and (local.segments, local.forgotten) == (0, 3)
    store.close()
    done = verify_from_the_fleet(tmp_path, fleet)
    assert "not re-derived" not in done.stdout, done.stdout

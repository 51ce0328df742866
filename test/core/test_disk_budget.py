"""The disk budget: its parts measured on real files, the deterministic policy (shipped
segments first, oldest first; the oldest unshipped only with no fleet store configured,
and only when that holds the budget), each deletion a logged segment_forgotten event,
facts byte-equal, `verify --archives` still passing, and learning paused with a
diagnosis when the budget cannot be held. Real SQLite stores, real segment files,
passes through ConsolidationService as the consolidator node runs them."""

import subprocess
import sys

import pytest
from helpers import result_event

from robot_memory.consolidation import RulesConfig, consolidation_pass, facts_snapshot
from robot_memory.consolidation.service import WARN, ConsolidationService
from robot_memory.event_kinds import SEGMENT_FORGOTTEN, SEGMENT_SHIPPED
from robot_memory.retention.archives import verify_archives
from robot_memory.retention.budget import (LIVE_STORE, OLDEST, OPERATOR, SEGMENTS, SHIPPED,
                                           WITNESS, Footprint, SegmentFile, hold_budget,
                                           measure, plan)
from robot_memory.retention.compaction import compact, compactable_until
from robot_memory.store import MemoryStore, compactions, verify_chain
from robot_memory.store.size import MB

IDENT = "e" * 64
SEGMENT_COUNT = 5


@pytest.fixture
def archived(tmp_path):
    """A store with five compressed segments behind it and results after them."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    store = MemoryStore(url, keep_open=True)
    partition = store.partition(IDENT)
    archive = tmp_path / "segments"
    for number in range(SEGMENT_COUNT + 1):
        partition.append_many([result_event(1000 + 400 * number + i, success=i % 3 != 0,
                                            force=float(i % 7), target=f"object_{i % 5}",
                                            reason="slipped" if i % 2 else "collision")
                               for i in range(400)])
        consolidation_pass(partition, RulesConfig())
        if number < SEGMENT_COUNT:
            assert compact(partition, compactable_until(partition), archive).compaction
    store.checkpoint_log()
    yield partition, archive, url
    store.close()


def segments_of(partition):
    with partition.store.read() as conn:
        return compactions(partition.identity_hash, conn)


def ship(partition, *numbers, wrong_hash=()):
    """Receipts as a fleet shipper logs them (the segment_shipped event's payload)."""
    found = segments_of(partition)
    for n in numbers:
        c = found[n]
        sha = "0" * 64 if n in wrong_hash else c.segment_sha256
        partition.append(SEGMENT_SHIPPED, {"segment": c.segment, "sha256": sha,
                                           "destination": "postgresql://fleet/segments"}, 1)


def forgotten(partition) -> list[tuple[str, str, str]]:
    return [(e.payload["segment"], e.payload["reason"], e.payload["operator"])
            for e in partition.events(kinds=[SEGMENT_FORGOTTEN])]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "robot_memory.cli", *args],
                          capture_output=True, text=True)


# -- the policy, pure ---------------------------------------------------------------------
def footprint(live: int, *segments: tuple[int, bool]) -> Footprint:
    files = tuple(SegmentFile(f"s{i}", f"{i:064x}", 100 * i + 1, 100 * i + 100, size, shipped)
                  for i, (size, shipped) in enumerate(segments))
    return Footprint({LIVE_STORE: live, SEGMENTS: sum(size for size, _ in segments)}, files)


def names(verdict) -> list[tuple[str, str]]:
    return [(d.segment.segment, d.reason) for d in verdict.deletions]


def test_the_policy_takes_shipped_segments_first_then_the_oldest_and_only_what_it_needs():
    f = footprint(1000, (100, False), (100, True), (100, False), (100, True), (100, True))
    assert f.total == 1500
    assert names(plan(f, 0, False)) == [] and plan(f, 0, False).held  # no budget
    assert names(plan(f, 1500, False)) == [] and plan(f, 1500, False).held
    # Shipped ones, oldest first, only as many as needed.
    assert names(plan(f, 1400, True)) == [("s1", SHIPPED)]
    assert names(plan(f, 1250, True)) == [("s1", SHIPPED), ("s3", SHIPPED), ("s4", SHIPPED)]
    # Then the oldest unshipped, only without a fleet store.
    verdict = plan(f, 1150, False)
    assert names(verdict) == [("s1", SHIPPED), ("s3", SHIPPED), ("s4", SHIPPED),
                              ("s0", OLDEST)] and verdict.held and verdict.after == 1100
    verdict = plan(f, 1150, True)  # a fleet store configured: unshipped never go
    assert names(verdict) == [("s1", SHIPPED), ("s3", SHIPPED), ("s4", SHIPPED)]
    assert not verdict.held and verdict.after == 1200
    # When even every unshipped segment would not hold it, none is deleted for nothing.
    verdict = plan(f, 900, False)
    assert names(verdict) == [("s1", SHIPPED), ("s3", SHIPPED), ("s4", SHIPPED)]
    assert not verdict.held
    assert plan(f, 1150, False) == plan(f, 1150, False)  # deterministic


# -- on a real store ------------------------------------------------------------------------
def test_the_parts_are_measured_from_the_files(archived, tmp_path):
    partition, archive, _ = archived
    witness = tmp_path / "witness.jsonl"
    witness.write_bytes(b"x" * 3000)
    (archive / "reset-facts.json").write_bytes(b"y" * 700)  # another file memory keeps there
    f = measure(partition, archive, witness)
    db = tmp_path / "m.db"
    assert f.parts[LIVE_STORE] == db.stat().st_size
    assert f.parts[WITNESS] == 3000 and f.parts["other_archive_files"] == 700
    assert [s.segment for s in f.segments] == [c.segment for c in segments_of(partition)]
    assert f.parts[SEGMENTS] == sum((archive / s.segment).stat().st_size for s in f.segments)
    assert not any(s.shipped for s in f.segments)


def test_over_budget_shipped_segments_go_first_each_on_the_record(archived):
    partition, archive, url = archived
    ship(partition, 1, 3, 0, wrong_hash=(0,))  # segment 0's receipt names another hash
    facts_before = facts_snapshot(partition)
    f = measure(partition, archive)
    by_name = {s.segment: s for s in f.segments}
    segs = segments_of(partition)
    assert [by_name[c.segment].shipped for c in segs] == [False, True, False, True, False]
    # Over by more than segment 1 holds: segments 1 and 3 go, in that order.
    budget = f.total - by_name[segs[1].segment].bytes - 1
    outcome = hold_budget(partition, archive, budget, shipping_configured=True)
    assert outcome.held
    assert [d.segment.segment for d in outcome.forgotten] == [segs[1].segment, segs[3].segment]
    assert forgotten(partition) == [(segs[1].segment, SHIPPED, OPERATOR),
                                    (segs[3].segment, SHIPPED, OPERATOR)]
    assert not (archive / segs[1].segment).exists() and (archive / segs[0].segment).exists()
    assert facts_snapshot(partition) == facts_before  # facts never change by it
    consolidation_pass(partition, RulesConfig())
    assert facts_snapshot(partition) == facts_before
    assert verify_chain(partition).ok
    report = verify_archives(partition, archive)
    assert report.ok and report.forgotten == 2 and report.segments == 3, report.describe()
    out = cli("verify", "--db", url, "--full", "--archives", str(archive))
    assert out.returncode == 0 and "2 forgotten on purpose" in out.stdout, out.stdout + out.stderr


def test_without_a_fleet_store_the_oldest_unshipped_segments_follow(archived):
    partition, archive, url = archived
    ship(partition, 2)
    segs = segments_of(partition)
    f = measure(partition, archive)
    size = {s.segment: s.bytes for s in f.segments}
    budget = f.total - size[segs[2].segment] - size[segs[0].segment] - 1
    outcome = hold_budget(partition, archive, budget, shipping_configured=False)
    assert outcome.held
    assert forgotten(partition) == [(segs[2].segment, SHIPPED, OPERATOR),
                                    (segs[0].segment, OLDEST, OPERATOR),
                                    (segs[1].segment, OLDEST, OPERATOR)]
    report = verify_archives(partition, archive)
    assert report.ok and report.forgotten == 3 and report.segments == 2
    assert cli("verify", "--db", url, "--full", "--archives", str(archive)).returncode == 0


def test_the_live_store_is_never_shortened_by_it(archived):
    partition, archive, _ = archived
    events_before = partition.count_events()
    kept_live = [e.payload for e in partition.events(kinds=["execution_result"])
                 if e.payload.get("failure_reason") == "collision"]
    outcome = hold_budget(partition, archive, 1, shipping_configured=False)
    assert not outcome.held and outcome.forgotten == []  # nothing deleted for nothing
    f = measure(partition, archive)
    outcome = hold_budget(partition, archive, f.total - f.parts[SEGMENTS] + 10,
                          shipping_configured=False)
    assert outcome.held and len(outcome.forgotten) == SEGMENT_COUNT
    assert partition.count_events() == events_before + SEGMENT_COUNT  # + the forgetting
    assert [e.payload for e in partition.events(kinds=["execution_result"])
            if e.payload.get("failure_reason") == "collision"] == kept_live


def service_on(partition, tmp_path, archive, **settings):
    lines = []
    now = iter(range(10**15, 10**16, 10**9))
    service = ConsolidationService(RulesConfig(), archive_dir=archive,
                                   log=lambda level, text: lines.append((level, text)),
                                   now_ns=lambda: next(now), **settings)
    service.attach(partition)
    return service, lines


def test_learning_pauses_with_a_diagnosis_when_unshipped_segments_must_stay(
        archived, tmp_path):
    partition, archive, _ = archived
    ship(partition, 0)
    segs = segments_of(partition)
    f = measure(partition, archive)
    budget = f.total - f.parts[SEGMENTS] // 2  # more than the one shipped segment holds
    service, lines = service_on(partition, tmp_path, archive, disk_budget_mb=budget / MB,
                                shipping_configured=True)
    facts_before = facts_snapshot(partition)
    results_before = partition.count_events("execution_result")
    assert service.run_pass() is None  # paused
    assert forgotten(partition) == [(segs[0].segment, SHIPPED, OPERATOR)]
    assert all((archive / c.segment).exists() for c in segs[1:])  # not shipped: kept
    assert service.counts.paused_passes == 1 and service.counts.budget_paused_passes == 1
    level, message = service.status()
    assert level == WARN and message.startswith("disk budget exceeded, learning paused")
    for words in ("live store", "write ahead log", "segments", "witness", "4 not shipped",
                  "a fleet store is configured", "disk_budget_mb", "forget-segment"):
        assert words in message, (words, message)
    assert any("pass paused: disk budget exceeded" in text for _, text in lines)
    # Results keep being logged (acknowledged ones are never lost) while learning waits.
    partition.append_many([result_event(9000 + i) for i in range(50)])
    assert partition.count_events("execution_result") == results_before + 50
    assert service.run_pass() is None and service.counts.budget_paused_passes == 2
    assert facts_snapshot(partition) == facts_before
    values = service.diagnostic_values()
    assert values["disk_budget_paused_passes"] == 2
    assert values["segments_forgotten_by_budget"] == 1
    assert values["disk_budget_used"] > 1.0
    assert values["disk.segments"] == SEGMENT_COUNT - 1
    assert values["disk.segments_not_shipped"] == SEGMENT_COUNT - 1
    # Raised by the operator: learning resumes, the new results are folded.
    service.disk_budget_mb = 2 * f.total / MB
    report = service.run_pass()
    assert report is not None and report.applied and report.events_read >= 50
    assert service.status()[0] != WARN and service.budget_problem == ""


def test_the_diagnostics_show_each_part_and_the_share_in_use(archived, tmp_path):
    partition, archive, _ = archived
    service, _ = service_on(partition, tmp_path, archive, disk_budget_mb=2048.0,
                            witness_path=tmp_path / "absent_witness.jsonl")
    service.run_pass()
    values = service.diagnostic_values()
    f = measure(partition, archive)
    for part in ("live_store", "write_ahead_log", "shared_memory", "segments",
                 "other_archive_files", "witness"):
        assert f"disk.{part}_mb" in values
    assert values["disk.segments_mb"] == round(f.parts[SEGMENTS] / MB, 3)
    assert values["disk.total_mb"] > 0 and values["disk_budget_mb"] == 2048.0
    assert values["disk_budget_used"] == round(values["disk.total_mb"] / 2048.0, 4) or \
        abs(values["disk_budget_used"] - values["disk.total_mb"] / 2048.0) < 1e-3
    assert service.counts.budget_paused_passes == 0 and forgotten(partition) == []
    # No budget: measured and shown, never acted on.
    service.disk_budget_mb = 0.0
    service.run_pass()
    assert "disk_budget_used" not in service.diagnostic_values()
    assert "disk.total_mb" in service.diagnostic_values()

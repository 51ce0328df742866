"""Compaction keeps the facts, the verification and the history: facts after any
compactions at any cuts equal those of a store that removed nothing; the live chain
verifies from the cut; the segments re-hash the whole history; and every way of tampering
with either is found and named."""

import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import result_event
from robot_memory.retention.archives import forget_segment, segment_holding, verify_archives
from robot_memory.retention.compaction import (STEPS_PER_COMPACTION, CompactionError, compact,
                                               compactable_until, default_archive_dir,
                                               retention_due)
from robot_memory.consolidation import RulesConfig, consolidation_pass, facts_snapshot
from robot_memory.consolidation.overrides import record_operator_fact
from robot_memory.event_kinds import COMPACTION
from robot_memory.store import MemoryStore, boot_check, verify_chain

IDENT = "c" * 64
CONFIG = RulesConfig()


def stream(seed: int, n: int, t0: float) -> list:
    rng = random.Random(seed)
    return [result_event(t0 + i, success=rng.random() < 0.7, force=float(rng.randrange(4)),
                         target=f"object_{rng.randrange(5)}", zone=f"zone_{rng.randrange(3)}",
                         reason=rng.choice(["slipped", "collision", "missed"]),
                         observations={"mass_kg": rng.randrange(5) / 10})
            for i in range(n)]


def provenance(partition) -> list:
    return sorted((f.kind, f.key, f.last_supporting_event_id, f.n_observations)
                  for f in partition.facts())


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), batches=st.lists(st.integers(1, 60), min_size=2,
                                                    max_size=6),
       cuts=st.lists(st.floats(0.0, 1.0), min_size=6, max_size=6))
def test_facts_after_compactions_at_any_cuts_equal_the_uncompacted_store(
        tmp_path_factory, seed, batches, cuts):
    where = tmp_path_factory.mktemp("cmp")
    live = MemoryStore(f"sqlite:///{where / 'live.db'}").partition(IDENT)
    whole = MemoryStore(f"sqlite:///{where / 'whole.db'}").partition(IDENT)
    t = 1_000.0
    for number, size in enumerate(batches):
        events = stream(seed + number, size, t)
        t += size
        for partition in (live, whole):
            partition.append_many(events)
            consolidation_pass(partition, CONFIG, stamp_ns=int(t * 1e9))
        limit = compactable_until(live)
        until = int(limit * cuts[number])
        report = compact(live, until, where / "segments", stamp_ns=int(t * 1e9))
        if report.compaction is not None:  # the same event, without removing anything
            whole.append(COMPACTION, report.compaction.payload(), int(t * 1e9))
    for partition in (live, whole):
        consolidation_pass(partition, CONFIG, stamp_ns=int((t + 1) * 1e9))
    assert facts_snapshot(live) == facts_snapshot(whole)
    assert provenance(live) == provenance(whole)
    assert live.head() == whole.head()  # the same chain, hash for hash
    assert verify_chain(live).ok, verify_chain(live).describe()
    assert boot_check(live).ok
    archives = verify_archives(live, where / "segments")
    assert archives.ok, archives.describe()
    assert archives.events_checked == sum(
        c.until_seq - c.from_seq + 1 for c in _compactions(live))


def _compactions(partition):
    from robot_memory.store import compactions
    with partition.store.read() as conn:
        return compactions(partition.identity_hash, conn)


@pytest.fixture
def compacted(tmp_path):
    """A store with two compactions behind it, and more events after."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    partition = MemoryStore(url).partition(IDENT)
    archive = tmp_path / "segments"
    for number in range(3):
        partition.append_many(stream(number, 200, 1000.0 + 200 * number))
        consolidation_pass(partition, CONFIG)
        if number < 2:
            assert compact(partition, compactable_until(partition), archive).compaction
    return partition, archive, url


def raw(url: str) -> sqlite3.Connection:
    conn = sqlite3.connect(url.removeprefix("sqlite:///"))
    conn.execute("DROP TRIGGER IF EXISTS events_refuse_update")
    conn.execute("DROP TRIGGER IF EXISTS events_refuse_delete_unpermitted")
    return conn


def test_the_live_store_verifies_and_keeps_what_must_stay(compacted):
    partition, archive, _ = compacted
    first, second = _compactions(partition)
    assert second.from_seq == first.until_seq + 1
    assert verify_chain(partition).ok and boot_check(partition).ok
    assert verify_archives(partition, archive).ok
    # Safety-relevant failures (collision) stayed live, ordinary ones did not.
    kept = [e for e in partition.events(until_seq=second.until_seq) if e.kind != COMPACTION]
    assert kept and all(e.payload.get("failure_reason") == "collision" for e in kept
                        if e.kind == "execution_result")
    assert first.kept + second.kept >= len([e for e in kept if e.kind == "execution_result"])


def test_a_delete_outside_a_compaction_is_refused_by_the_database(compacted):
    partition, _, url = compacted
    conn = sqlite3.connect(url.removeprefix("sqlite:///"))
    last = partition.head()[0]
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("DELETE FROM events WHERE seq = ?", (last - 5,))
    conn.close()


def test_live_rows_deleted_around_the_triggers_are_found(compacted):
    partition, _, url = compacted
    conn = raw(url)
    conn.execute("DELETE FROM events WHERE seq = ?", (partition.head()[0] - 3,))
    conn.commit()
    report = verify_chain(partition)
    assert not report.ok and "missing" in report.reason
    assert not boot_check(partition).ok


def test_a_kept_event_deleted_after_its_compaction_is_found(compacted):
    partition, _, url = compacted
    first = _compactions(partition)[0]
    conn = raw(url)
    seq = conn.execute("SELECT min(seq) FROM events WHERE identity_hash = ? AND seq <= ?",
                       (IDENT, first.until_seq)).fetchone()[0]
    conn.execute("DELETE FROM events WHERE seq = ?", (seq,))
    conn.commit()
    report = verify_chain(partition)
    assert not report.ok and ("left live" in report.reason or "present" in report.reason)


def test_a_forged_compaction_event_is_found(compacted):
    partition, _, _ = compacted
    second = _compactions(partition)[1]
    forged = second.payload() | {"from_seq": second.until_seq + 1,
                                 "until_seq": partition.head()[0] - 10, "removed": 50}
    partition.append(COMPACTION, forged, 0)
    report = verify_chain(partition)
    assert not report.ok and "forged" in report.reason + report.describe()


@pytest.mark.parametrize("damage", ["missing", "edited", "swapped", "truncated"])
def test_a_damaged_segment_is_found_and_named(compacted, damage):
    partition, archive, _ = compacted
    first, second = _compactions(partition)
    one, two = archive / first.segment, archive / second.segment
    if damage == "missing":
        one.unlink()
    elif damage == "edited":  # one byte of the compressed stream
        data = bytearray(one.read_bytes())
        data[len(data) // 2] ^= 0x01
        one.write_bytes(bytes(data))
    elif damage == "swapped":
        data_one, data_two = one.read_bytes(), two.read_bytes()
        one.write_bytes(data_two)
        two.write_bytes(data_one)
    else:
        one.write_bytes(one.read_bytes()[:-200])
    report = verify_archives(partition, archive)
    assert not report.ok and first.segment in report.problem
    assert ("missing" if damage == "missing" else "SHA-256") in report.problem
    assert verify_chain(partition).ok  # the live store itself is intact


def test_forgetting_a_segment_is_logged_and_the_check_skips_only_it(compacted):
    partition, archive, _ = compacted
    first, second = _compactions(partition)
    (archive / first.segment).unlink()  # deleted by hand: a problem
    assert "missing" in verify_archives(partition, archive).problem
    forget_segment(partition, archive, first.segment, "ops", "older than a year")
    report = verify_archives(partition, archive)
    assert report.ok and report.segments == 1 and report.forgotten == 1
    assert [e.payload["segment"] for e in partition.events(kinds=["segment_forgotten"])] \
        == [first.segment]
    assert verify_chain(partition).ok


def test_a_segment_that_cannot_be_written_leaves_the_store_untouched(tmp_path):
    partition = MemoryStore(f"sqlite:///{tmp_path / 'm.db'}").partition(IDENT)
    partition.append_many(stream(1, 100, 1000.0))
    consolidation_pass(partition, CONFIG)
    head, count = partition.head(), partition.count_events()
    blocked = tmp_path / "not_a_directory"
    blocked.write_text("a file where the archive directory should be")
    with pytest.raises(CompactionError, match="untouched"):
        compact(partition, compactable_until(partition), blocked / "segments")
    assert partition.head() == head and partition.count_events() == count
    assert verify_chain(partition).ok


def test_only_consolidated_events_are_compacted(tmp_path):
    partition = MemoryStore(f"sqlite:///{tmp_path / 'm.db'}").partition(IDENT)
    partition.append_many(stream(1, 100, 1000.0))
    report = compact(partition, 10**9, tmp_path / "segments")
    assert report.compaction is None and "consolidated" in report.why_nothing
    consolidation_pass(partition, CONFIG)
    partition.append_many(stream(2, 50, 2000.0))
    report = compact(partition, 10**9, tmp_path / "segments")
    assert report.compaction.until_seq == compactable_until(partition) == 100


def test_overrides_stay_live_and_the_segment_holding_an_event_is_named(tmp_path):
    partition = MemoryStore(f"sqlite:///{tmp_path / 'm.db'}").partition(IDENT)
    partition.append_many(stream(1, 40, 1000.0))
    record_operator_fact(partition, "ops", "measured", "object_property", "object_1 + mass_kg",
                         {"target_class": "object_1", "property": "mass_kg",
                          "band": {"median": 0.3}}, 0.9, 1)
    partition.append_many(stream(2, 40, 2000.0))
    consolidation_pass(partition, CONFIG)
    first_result = next(iter(partition.events(kinds=["execution_result"])))
    report = compact(partition, compactable_until(partition), tmp_path / "segments")
    assert [e.kind for e in partition.events(kinds=["override"])] == ["override"]
    holding = segment_holding(partition, first_result.id)
    assert holding is not None and holding.segment == report.compaction.segment


def cli(*args):
    return subprocess.run([sys.executable, "-m", "robot_memory.cli", *args],
                          capture_output=True, text=True)


def test_compact_and_verify_the_archives_from_the_command_line(compacted):
    partition, _, url = compacted
    ident = ["--db", url, "--identity", IDENT]
    out = cli("compact", *ident)  # the third batch, into the default directory
    assert out.returncode == 0 and "compacted seq" in out.stdout, out.stderr
    default = Path(url.removeprefix("sqlite:///") + ".segments")
    assert len(list(default.glob("*.segment.jsonl.zst"))) == 1
    out = cli("verify", "--db", url, "--full", "--archives", str(default))
    # The first two compactions wrote elsewhere: named as missing from this directory.
    assert out.returncode == 1 and "is missing from" in out.stdout
    out = cli("compact", *ident, "--before-time", "1")
    assert out.returncode == 0 and "nothing compacted" in out.stdout


def test_replay_reads_the_segments_and_names_a_missing_one(tmp_path):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    partition = MemoryStore(url).partition(IDENT)
    partition.append_many(stream(3, 150, 1000.0))
    consolidation_pass(partition, CONFIG)
    partition.append_many(stream(4, 50, 2000.0))
    ident = ["--db", url, "--identity", IDENT]
    before = {point: cli("replay", *ident, "--until-event", str(point)).stdout
              for point in (60, 190)}
    assert compact(partition, 120, default_archive_dir(url)).compaction.until_seq == 120
    for point, snapshot in before.items():  # 60: compacted; 190: after the cut
        out = cli("replay", *ident, "--until-event", str(point))
        assert out.returncode == 0 and out.stdout == snapshot, out.stderr
    segment = next(default_archive_dir(url).glob("*.segment.jsonl.zst"))
    segment.rename(tmp_path / "elsewhere")
    out = cli("replay", *ident, "--until-event", "190")
    assert out.returncode == 4 and segment.name in out.stderr


def test_retention_sheds_a_long_history_in_steps(tmp_path):
    partition = MemoryStore(f"sqlite:///{tmp_path / 'm.db'}").partition(IDENT)
    partition.append_many(stream(5, 300, 1000.0))
    assert retention_due(partition, retain=10, every=5) is None  # nothing consolidated yet
    consolidation_pass(partition, CONFIG)
    steps = []
    while (until := retention_due(partition, retain=100, every=5)) is not None:
        steps.append(compact(partition, until, tmp_path / "segments").compaction.until_seq)
    assert steps[:4] == [STEPS_PER_COMPACTION * 5 * n for n in (1, 2, 3, 4)]
    # The last one reached retain_events from the head it saw, before its own event.
    assert steps[-1] == partition.head()[0] - 1 - 100
    assert verify_archives(partition, tmp_path / "segments").ok


def test_explain_reads_the_segments_or_names_them(tmp_path):
    from robot_memory.grounding.explain import explain_fact, find_fact, format_explanation
    url = f"sqlite:///{tmp_path / 'm.db'}"
    partition = MemoryStore(url).partition(IDENT)
    partition.append_many(stream(6, 200, 1000.0))
    consolidation_pass(partition, CONFIG)
    fact = max(partition.facts(), key=lambda f: (f.n_observations, f.kind, f.key))
    before = explain_fact(partition, fact)["supporting_events"]
    archive = tmp_path / "segments"
    report = compact(partition, compactable_until(partition), archive)
    fact = find_fact(partition, kind=fact.kind, key=fact.key)
    read = explain_fact(partition, fact, archive)
    assert read["archived_read"] and read["supporting_events"] == before
    assert "archive segment(s): read" in format_explanation(read)
    unread = explain_fact(partition, fact)  # no directory given: named, not read
    assert not unread["archived_read"]
    assert unread["supporting_events"]["count"] < before["count"]
    assert report.compaction.segment in format_explanation(unread)

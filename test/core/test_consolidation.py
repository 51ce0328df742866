import json
import random

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from robot_memory.canonical import canonical_json
from robot_memory.consolidation import (CONSOLIDATION_RUN, ConcurrentPass, RulesConfig,
                                        consolidation_pass, facts_snapshot)
from robot_memory.consolidation.changes import facts_written
from robot_memory.store.checkpoint import _leading_fields, _rule_version
from robot_memory.consolidation.diff import format_diff
from robot_memory.manifest import load_manifest
from robot_memory.intake.records import validate_record
from robot_memory.store import MemoryStore, NewEvent, Partition

IDENT = "c" * 64


def result(i, success=True, force=25.0, reason="", skill="manipulation.grasp",
           target="glass_cup", env="sim_relaxed"):
    record = validate_record({"stamp_ns": 1_000_000_000 * (i + 1), "skill_id": skill,
                              "target_class": target, "environment": env,
                              "parameters": {"force_n": force}, "success": success,
                              "failure_reason": reason})
    return NewEvent("execution_result", record.payload(), record.stamp_ns)


def seed_v1_events():
    return [result(i, success=i % 5 != 0, reason="" if i % 5 else "slipped")
            for i in range(1000)]


def test_seed_v1_one_fact_with_exact_counts(db_url):
    part = MemoryStore(db_url).partition(IDENT)
    part.append_many(seed_v1_events())
    consolidation_pass(part)
    facts = [f for f in part.facts() if f.kind == "skill_success_rate"]
    assert len(facts) == 1
    value = facts[0].value
    assert (facts[0].kind, value["n"], value["successes"], value["rate"]) == \
        ("skill_success_rate", 1000, 800, 0.8)
    assert facts[0].n_observations == 1000
    assert value["recommended_parameters"]["force_n"]["median"] == 25.0
    assert value["most_common_failure"] == "slipped"
    assert facts[0].status == "active"
    runs = list(part.events([CONSOLIDATION_RUN]))
    assert len(runs) == 1 and runs[0].payload["events_read"] == 1000


def test_second_pass_writes_nothing(db_url):
    part = MemoryStore(db_url).partition(IDENT)
    part.append_many(seed_v1_events())
    consolidation_pass(part)
    snapshot, head = facts_snapshot(part), part.head()
    again = consolidation_pass(part)
    assert again.facts_touched == 0 and again.events_read == 0
    assert facts_snapshot(part) == snapshot and part.head() == head


def test_shuffled_insert_gives_byte_equal_snapshot(tmp_path):
    snapshots = []
    for n, seed in enumerate([None, 1, 2]):
        events = seed_v1_events()
        if seed is not None:
            random.Random(seed).shuffle(events)
        part = MemoryStore(f"sqlite:///{tmp_path / f'{n}.db'}").partition(IDENT)
        part.append_many(events)
        consolidation_pass(part)
        snapshots.append(facts_snapshot(part))
    assert snapshots[0] == snapshots[1] == snapshots[2]


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from([5.0, 15.0, 25.0, 24.5]),
                          st.sampled_from(["glass_cup", "mug"])), min_size=1, max_size=60),
       st.lists(st.integers(min_value=1, max_value=59), max_size=4), st.randoms())
def test_pass_boundaries_and_order_never_change_the_snapshot(tmp_path_factory, outcomes, cuts,
                                                             rnd):
    events = [result(i, success=ok, force=force, target=target, reason="" if ok else "slipped")
              for i, (ok, force, target) in enumerate(outcomes)]
    one = MemoryStore(f"sqlite:///{tmp_path_factory.mktemp('one') / 'm.db'}").partition(IDENT)
    one.append_many(events)
    consolidation_pass(one)
    shuffled = list(events)
    rnd.shuffle(shuffled)
    many = MemoryStore(f"sqlite:///{tmp_path_factory.mktemp('many') / 'm.db'}").partition(IDENT)
    bounds = sorted({c for c in cuts if c < len(shuffled)}) + [len(shuffled)]
    start = 0
    for end in bounds:
        many.append_many(shuffled[start:end])
        consolidation_pass(many)
        start = end
    assert facts_snapshot(one) == facts_snapshot(many)


def test_promotion_threshold_keeps_thin_facts_candidates(db_url):
    part = MemoryStore(db_url).partition(IDENT)
    part.append_many([result(0), result(1)])
    consolidation_pass(part, RulesConfig(promotion_min_observations=3))
    assert {f.status for f in part.facts()} == {"candidate"}
    part.append(*_args(result(2)))
    report = consolidation_pass(part, RulesConfig(promotion_min_observations=3))
    assert {f.status for f in part.facts()} == {"active"}
    assert "status candidate -> active" in format_diff(report)


def _args(event):
    return event.kind, event.payload, event.stamp_ns


def test_dry_run_reports_without_writing(db_url):
    part = MemoryStore(db_url).partition(IDENT)
    part.append_many([result(i) for i in range(4)])
    report = consolidation_pass(part, apply=False)
    assert report.facts_touched == 2 and not report.applied  # success rate + zone risk
    assert part.facts() == [] and part.count_events(CONSOLIDATION_RUN) == 0
    assert "+ skill_success_rate [manipulation.grasp + glass_cup + sim_relaxed]" in \
        format_diff(report)


def test_the_diff_label_follows_the_mode_asked_for_and_the_outcome(db_url):
    part = MemoryStore(db_url).partition(IDENT)
    labels = {}
    labels["dry, nothing new"] = format_diff(consolidation_pass(part, apply=False))
    labels["apply, nothing new"] = format_diff(consolidation_pass(part))
    part.append_many([result(i) for i in range(4)])
    labels["dry, new"] = format_diff(consolidation_pass(part, apply=False))
    labels["apply, new"] = format_diff(consolidation_pass(part))
    labels["apply, nothing new again"] = format_diff(consolidation_pass(part))
    first_lines = {case: text.splitlines()[0] for case, text in labels.items()}
    assert first_lines["dry, nothing new"].endswith(
        "[dry run, nothing written: nothing new to consolidate]")
    assert first_lines["apply, nothing new"].endswith(
        "[nothing new to consolidate, nothing written]")
    assert first_lines["dry, new"].endswith("[dry run, nothing written]")
    assert first_lines["apply, new"].endswith("[applied]")
    assert first_lines["apply, nothing new again"].endswith(
        "[nothing new to consolidate, nothing written]")


def test_legacy_payloads_are_skipped_and_counted(db_url):
    part = MemoryStore(db_url).partition(IDENT)
    part.append("execution_result", {"skill_id": "", "success": True}, 1)
    part.append(*_args(result(1)))
    report = consolidation_pass(part)
    assert report.skipped["invalid_payload:empty_skill_id"] == 1
    assert report.skipped["object_property:no_observations"] == 1  # the good one has none
    assert part.facts()[0].n_observations == 1


def test_identity_hash_unchanged_by_passes(db_url, manifest_file):
    before = load_manifest(manifest_file).identity_hash()
    part = MemoryStore(db_url).partition(before)
    for chunk in range(3):
        part.append_many([result(chunk * 10 + i) for i in range(10)])
        consolidation_pass(part)
        assert load_manifest(manifest_file).identity_hash() == before
    assert manifest_file.read_bytes() == manifest_file.read_bytes()


def test_identities_never_see_each_other(db_url):
    store = MemoryStore(db_url)
    a, b = store.partition("a" * 64), store.partition("b" * 64)
    a.append_many([result(i) for i in range(5)])
    consolidation_pass(a)
    consolidation_pass(b)
    assert len(a.facts()) == 2 and b.facts() == []


class ResultsArriveMidPass(Partition):
    """A real second writer commits results at the worst moment: just after the pass has
    opened its read snapshot (its first query) and before it decides where to stop."""

    def __init__(self, store, identity_hash, writer, arriving):
        super().__init__(store, identity_hash)
        self.writer, self.arriving = writer, arriving

    def latest_payload_json(self, kind, conn):
        found = super().latest_payload_json(kind, conn)
        if self.arriving:
            batch, self.arriving = self.arriving, []
            self.writer.append_many(batch)
        return found


@pytest.mark.parametrize("url_fixture", ["db_url", "pg_url"])
def test_results_committed_during_a_pass_are_read_by_the_next(request, url_fixture):
    url = request.getfixturevalue(url_fixture)
    store, other_store = MemoryStore(url), MemoryStore(url)
    writer = other_store.partition(IDENT)
    writer.append_many([result(i) for i in range(3)])
    part = ResultsArriveMidPass(store, IDENT, writer, [result(i) for i in range(3, 7)])
    first = consolidation_pass(part)
    second = consolidation_pass(part)
    # A pass stops at the head its own snapshot shows (SQLite: the 3 it saw; PostgreSQL,
    # read committed: all 7); whatever it did not read, the next pass reads.
    assert first.last_seq == first.events_read
    assert first.events_read + second.events_read == 7
    fact = next(f for f in part.facts() if f.kind == "skill_success_rate")
    assert fact.n_observations == 7
    store.close()
    other_store.close()


def test_a_pass_built_on_a_run_that_is_no_longer_the_newest_is_refused(tmp_path):
    """commit_pass writes only if the newest run is still the one the pass read: a pass
    that committed in between makes it raise ConcurrentPass and write nothing."""
    part = MemoryStore(f"sqlite:///{tmp_path / 'memory.db'}").partition(IDENT)
    part.append_many([result(i) for i in range(5)])
    assert part.commit_pass(0, False, [], [], []) == []  # no run yet: seq 0 is current
    first = consolidation_pass(part)
    first_seq = part.event_by_id(first.run_event_id).seq
    part.append_many([result(5 + i, success=False, reason="slipped") for i in range(5)])
    consolidation_pass(part)
    before = (facts_snapshot(part), part.count_events())
    with pytest.raises(ConcurrentPass):
        part.commit_pass(first_seq, False, [("zone_risk", "x", "{}", False)], [],
                         [NewEvent(CONSOLIDATION_RUN, {"stale": True}, 0)])
    assert (facts_snapshot(part), part.count_events()) == before
    with pytest.raises(ConcurrentPass):
        part.commit_pass(0, False, [], [], [])


def test_the_checkpoint_is_read_from_the_run_s_leading_fields(db_url):
    """The pass reads last_seq and override_seq without decoding the run's list of
    touched facts; a run payload without the fields after them (an older release's)
    is decoded whole, with the same checkpoint."""
    part = MemoryStore(db_url).partition(IDENT)
    part.append_many([result(i) for i in range(5)])
    consolidation_pass(part)
    with part.store.read() as conn:
        _, _, stored = part.latest_payload_json(CONSOLIDATION_RUN, conn)
    full = json.loads(stored)
    lean = _leading_fields(stored)
    assert (lean["last_seq"], lean["override_seq"]) == (full["last_seq"], full["override_seq"])
    assert "touched_facts" not in lean and full["touched_facts"]
    older = {k: v for k, v in full.items() if k not in ("reset", "override_seq")}
    assert _leading_fields(canonical_json(older)) == older
    # The rule version is read from the text too: the run's own, not a fact key's.
    assert _rule_version(stored) == full["rule_version"] == "v2.0"
    assert _rule_version(canonical_json(older)) == "v2.0"
    tricky = {**full, "touched_facts": ['skill_success_rate|a "rule_version":"v9" key']}
    assert _rule_version(canonical_json(tricky)) == "v2.0"


def _facts_in_database_file_alone(db_path, tmp_path) -> int:
    """Facts in a copy of the database file without its write-ahead log: what has been
    checkpointed into the file."""
    import shutil
    import sqlite3
    copy = tmp_path / "file_alone.db"
    shutil.copy(db_path, copy)
    conn = sqlite3.connect(copy)
    try:
        return conn.execute("SELECT count(*) FROM semantic_facts").fetchone()[0]
    finally:
        conn.close()


def test_a_store_kept_open_leaves_the_log_checkpoint_to_its_owner(tmp_path):
    """keep_open (the consolidator node's store): a pass commits into the write-ahead log
    and neither its commit nor its connection's close copies it into the database file;
    checkpoint_log() does, and what was committed is there for any reader before it."""
    path = tmp_path / "memory.db"
    store = MemoryStore(f"sqlite:///{path}", keep_open=True)
    part = store.partition(IDENT)
    part.append_many(seed_v1_events())
    report = consolidation_pass(part)
    assert report.applied and report.facts_touched > 0
    committed = facts_snapshot(MemoryStore(f"sqlite:///{path}").partition(IDENT))
    assert json.loads(committed)  # another connection reads the pass's facts
    assert _facts_in_database_file_alone(path, tmp_path) == 0  # still in the log only
    store.checkpoint_log()
    assert _facts_in_database_file_alone(path, tmp_path) == report.facts_touched
    assert (tmp_path / "memory.db-wal").stat().st_size == 0  # and the log emptied
    store.close()
    reopened = MemoryStore(f"sqlite:///{path}").partition(IDENT)
    assert facts_snapshot(reopened) == committed


def test_a_store_not_kept_open_checkpoints_as_its_last_connection_closes(tmp_path):
    path = tmp_path / "memory.db"
    part = MemoryStore(f"sqlite:///{path}").partition(IDENT)
    part.append_many(seed_v1_events())
    report = consolidation_pass(part)
    assert _facts_in_database_file_alone(path, tmp_path) == report.facts_touched


def test_the_log_checkpoint_leaves_what_a_reader_still_reads(tmp_path):
    """A reader's snapshot holds its part of the log: the checkpoint copies what it can,
    empties nothing under the reader, and a later one finishes the job."""
    import sqlite3
    path = tmp_path / "memory.db"
    store = MemoryStore(f"sqlite:///{path}", keep_open=True)
    part = store.partition(IDENT)
    part.append_many(seed_v1_events()[:10])
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM events").fetchone()[0] == 10
    part.append_many(seed_v1_events()[10:20])  # after the reader's snapshot
    store.checkpoint_log()
    assert (tmp_path / "memory.db-wal").stat().st_size > 0
    assert reader.execute("SELECT count(*) FROM events").fetchone()[0] == 10
    reader.execute("COMMIT")
    reader.close()
    store.checkpoint_log()
    assert (tmp_path / "memory.db-wal").stat().st_size == 0
    assert part.count_events() == 20
    store.close()


def test_facts_written_are_the_rows_the_store_holds_after_the_pass(db_url):
    """The delta the consolidator publishes comes from the pass's changes, read back
    only for facts new to the store: it must be exactly the stored rows, ids included."""
    part = MemoryStore(db_url).partition(IDENT)
    part.append_many(seed_v1_events()[:500])
    first = consolidation_pass(part)
    assert facts_written(part, first.changes) == part.facts()  # every fact new
    part.append_many([result(1000 + i, success=i % 3 == 0, target=f"cup_{i % 4}")
                      for i in range(60)] + seed_v1_events()[500:])
    second = consolidation_pass(part)
    assert any(c.old is None for c in second.changes) and \
        any(c.old is not None for c in second.changes)
    stored = {(f.kind, f.key): f for f in part.facts()}
    written = facts_written(part, second.changes)
    assert [(f.kind, f.key) for f in written] == sorted((c.kind, c.key) for c in second.changes)
    assert written == [stored[(f.kind, f.key)] for f in written]

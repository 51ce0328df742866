"""Human overrides: each is an event in the log, its effect comes from the passes, and
replay reproduces it byte for byte."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import result_event

from robot_memory.consolidation import consolidation_pass, facts_snapshot, replay_snapshot
from robot_memory.consolidation import overrides as ov
from robot_memory.event_kinds import OVERRIDE
from robot_memory.grounding.index import ABSTAIN, OK, GroundingIndex, GroundingRequest
from robot_memory.store import MemoryStore, NewEvent, verify_chain

IDENT = "c" * 64
KEY = "manipulation.grasp + glass_cup + sim_relaxed"
RATE = ("skill_success_rate", KEY)
WHO = {"operator": "alice", "reason": "bench test showed 12 N is enough"}


@pytest.fixture
def part(db_url):
    return MemoryStore(db_url).partition(IDENT)


def facts(part):
    return {(f.kind, f.key): f for f in part.facts()}


def results(part, first, n, success=True, force=25.0):
    part.append_many([result_event(first + i, success=success, force=force) for i in range(n)])


def assert_replay_matches(part):
    assert replay_snapshot(part) == facts_snapshot(part)


def test_operator_fact_is_served_marked_and_kept_against_evidence(part):
    results(part, 0, 6)
    consolidation_pass(part)
    value = {"skill_id": "manipulation.grasp", "target_class": "glass_cup",
             "environment": "sim_relaxed", "recommended_parameters": {"force_n": {"median": 12}}}
    ov.record_operator_fact(part, kind=RATE[0], key=KEY, value=value, confidence=0.9,
                            stamp_ns=10**12, **WHO)
    report = consolidation_pass(part)
    assert report.overrides_applied == 1 and report.events_read == 0
    fact = facts(part)[RATE]
    assert fact.rule_version == "operator/1" and fact.status == "active"
    assert fact.value["source"] == "operator" and fact.value["operator"] == "alice"
    results(part, 100, 10, force=40.0)  # new robot evidence does not replace it
    consolidation_pass(part)
    assert facts(part)[RATE].value["recommended_parameters"]["force_n"]["median"] == 12
    answer = GroundingIndex(IDENT, part.facts()).lookup(
        GroundingRequest("manipulation.grasp", "glass_cup", "sim_relaxed"))
    assert answer.status == OK and RATE in {(f.kind, f.key) for f in answer.facts}
    assert_replay_matches(part)


def test_invalidated_fact_stays_in_the_table_and_is_never_served(part):
    results(part, 0, 8)
    consolidation_pass(part)
    ov.record_invalidation(part, fact=facts(part)[RATE], stamp_ns=10**12, **WHO)
    consolidation_pass(part)
    assert facts(part)[RATE].status == "invalidated"
    results(part, 100, 8)
    consolidation_pass(part)
    fact = facts(part)[RATE]
    assert fact.status == "invalidated" and fact.n_observations == 16  # evidence still counted
    answer = GroundingIndex(IDENT, part.facts()).lookup(
        GroundingRequest("manipulation.grasp", "glass_cup", "sim_relaxed",
                         fact_kinds=("skill_success_rate",)))
    assert answer.status == ABSTAIN
    assert_replay_matches(part)


def test_freeze_holds_learning_until_unfreeze_then_catches_up(part, tmp_path):
    results(part, 0, 5)
    consolidation_pass(part)
    ov.record_freeze(part, frozen=True, stamp_ns=10**12, **WHO)
    results(part, 100, 7, success=False)
    report = consolidation_pass(part)
    assert report.frozen and facts(part)[RATE].n_observations == 5
    ov.record_invalidation(part, fact=facts(part)[RATE], stamp_ns=10**12, **WHO)
    consolidation_pass(part)  # overrides still apply while frozen
    assert facts(part)[RATE].status == "invalidated" and facts(part)[RATE].n_observations == 5
    assert_replay_matches(part)
    ov.record_freeze(part, frozen=False, stamp_ns=10**12, **WHO)
    report = consolidation_pass(part)
    assert not report.frozen and report.events_read == 7
    assert facts(part)[RATE].n_observations == 12
    assert_replay_matches(part)
    # The same log cut into other passes gives the same facts.
    other = MemoryStore(f"sqlite:///{tmp_path / 'other.db'}").partition(IDENT)
    other.append_many([NewEvent(e.kind, e.payload, e.stamp_ns)
                       for e in part.events() if e.kind in ("execution_result", OVERRIDE)])
    consolidation_pass(other)
    assert facts_snapshot(other) == facts_snapshot(part)


def test_reset_archives_by_hash_and_learning_starts_over(part, tmp_path):
    results(part, 0, 9)
    consolidation_pass(part)
    before = facts(part)
    archive = tmp_path / "archive.json"
    event = ov.record_reset(part, stamp_ns=10**12, archive_path=archive, **WHO)
    assert event.payload["archive_sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert event.payload["facts"] == len(before)
    archived = json.loads(archive.read_text())
    assert {(f["kind"], f["key"]) for f in archived["facts"]} == set(before)
    consolidation_pass(part)
    assert part.facts() == []  # the old knowledge does not come back
    results(part, 100, 4, success=False)
    consolidation_pass(part)
    assert facts(part)[RATE].n_observations == 4
    assert_replay_matches(part)
    assert verify_chain(part).ok  # history untouched: the results before are still there
    assert part.count_events("execution_result") == 13
    with pytest.raises(ov.OverrideError, match="exists"):
        ov.record_reset(part, stamp_ns=10**12, archive_path=archive, **WHO)


def test_replay_at_points_between_overrides(part):
    snapshots = []
    results(part, 0, 6)
    consolidation_pass(part)
    snapshots.append((part.head()[0], facts_snapshot(part)))
    ov.record_invalidation(part, fact=facts(part)[RATE], stamp_ns=10**12, **WHO)
    results(part, 50, 3)
    consolidation_pass(part)
    snapshots.append((part.head()[0], facts_snapshot(part)))
    ov.record_reset(part, stamp_ns=10**12, archive_path=Path(part.store.url[10:]).parent / "a",
                    **WHO)
    results(part, 90, 5)
    consolidation_pass(part)
    snapshots.append((part.head()[0], facts_snapshot(part)))
    for seq, snapshot in snapshots:
        assert replay_snapshot(part, until_seq=seq - 1) == snapshot  # before the run event


@pytest.mark.parametrize("bad, message", [
    ({"operator": "", "reason": "x"}, "operator: required"),
    ({"operator": "bob", "reason": " "}, "reason: required"),
])
def test_overrides_need_who_and_why(part, bad, message):
    with pytest.raises(ov.OverrideError, match=message):
        ov.record_freeze(part, frozen=True, stamp_ns=1, **bad)
    assert part.count_events() == 0


def cli(*args):
    return subprocess.run([sys.executable, "-m", "robot_memory.cli", *args],
                          capture_output=True, text=True, timeout=120)


def test_cli_overrides(part, db_url, tmp_path):
    results(part, 0, 6)
    consolidation_pass(part)
    store = ["--db", db_url, "--identity", IDENT, "--operator", "alice", "--reason", "audit"]
    done = cli("override", "invalidate", f"skill_success_rate|{KEY}", *store)
    assert done.returncode == 0 and "override event" in done.stdout
    missing = cli("override", "invalidate", "skill_success_rate|no such key", *store)
    # an input error (FactNotFound, OverrideError: exit 3); a bad argument is a usage error (2)
    assert missing.returncode == 3 and "no fact skill_success_rate [no such key]" in missing.stderr
    bad = cli("override", "fact", "--kind", "skill_success_rate", "--key", KEY,
              "--value", "{not json", *store)
    assert bad.returncode == 2 and "--value: not JSON" in bad.stderr
    wrong = cli("override", "fact", "--kind", "no_kind", "--key", KEY, "--value", '{"a": 1}',
                *store)
    assert wrong.returncode == 3 and "kind: 'no_kind'" in wrong.stderr
    assert cli("override", "freeze", *store).returncode == 0
    assert cli("override", "reset", "--archive", str(tmp_path / "x.json"), *store).returncode == 0
    assert cli("consolidate", "--apply", "--db", db_url, "--identity", IDENT).returncode == 0
    assert part.facts() == [] and (tmp_path / "x.json").exists()
    kinds = [e.payload["action"] for e in part.events([OVERRIDE])]
    assert kinds == ["invalidate", "freeze", "reset_semantic"]

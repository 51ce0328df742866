"""The consolidator's pass policy without ROS: real passes on a real SQLite store file,
through ConsolidationService as the node calls it (ros/consolidator.py)."""

import json

import pytest
from helpers import result_event

from robot_memory.consolidation import RulesConfig, consolidation_pass
from robot_memory.consolidation.overrides import FREEZE, OPERATOR_FACT, RESET_SEMANTIC
from robot_memory.consolidation.service import (ERROR, OK, WARN, ConsolidationService,
                                                FactsUpdate)
from robot_memory.event_kinds import COMPACTION, PRIVACY_REJECTION
from robot_memory.store import MemoryStore

IDENT = "c" * 64
KEY = "manipulation.grasp + glass_cup + sim_relaxed"
RATE = ("skill_success_rate", KEY)


class Recorder:
    """What the service hands its node: the updates it publishes and the lines it logs."""

    def __init__(self):
        self.updates: list[FactsUpdate] = []
        self.lines: list[tuple[str, str]] = []

    def publish(self, update: FactsUpdate) -> None:
        self.updates.append(update)

    def log(self, level: str, text: str) -> None:
        self.lines.append((level, text))

    def logged(self, part: str) -> list[tuple[str, str]]:
        return [line for line in self.lines if part in line[1]]


@pytest.fixture
def store(db_url):
    store = MemoryStore(db_url, keep_open=True)
    yield store
    store.close()


@pytest.fixture
def part(store):
    return store.partition(IDENT)


@pytest.fixture
def out():
    return Recorder()


def service_on(part, out, tmp_path, **settings) -> ConsolidationService:
    now = iter(range(10**15, 10**16, 10**9))
    service = ConsolidationService(RulesConfig(), archive_dir=tmp_path / "archives",
                                   publish=out.publish, log=out.log,
                                   now_ns=lambda: next(now), **settings)
    service.attach(part)
    return service


def results(part, first, n, success=True, force=25.0):
    part.append_many([result_event(first + i, success=success, force=force)
                      for i in range(n)])


def by_key(facts):
    return {(f.kind, f.key): f for f in facts}


def test_a_pass_publishes_what_it_wrote_and_a_second_pass_nothing(part, out, tmp_path):
    service = service_on(part, out, tmp_path)
    results(part, 0, 12)
    report = service.run_pass()
    assert report.applied and report.events_read == 12
    [update] = out.updates
    assert update.reloaded is None and update.previous_run_event_id == 0
    assert update.run_event_id == report.run_event_id == service.facts_run_event_id
    assert by_key(update.changed) == by_key(part.facts()) and RATE in by_key(update.changed)
    assert service.counts.passes == 1 and service.counts.promoted_total >= 1
    assert out.logged("consolidation pass: read 12 events")
    again = service.run_pass()
    assert again is not None and not again.applied and again.nothing_new
    assert len(out.updates) == 1 and service.counts.passes == 1
    values = service.diagnostic_values()
    assert values["passes"] == 1 and values["last_pass_events_read"] == 12
    assert values["knowledge_promoted"] == "true"
    assert service.status() == (OK, "consolidating")


def test_a_dry_run_writes_and_publishes_nothing(part, out, tmp_path):
    service = service_on(part, out, tmp_path)
    results(part, 0, 5)
    report = service.run_pass(apply=False)
    assert report.dry_run and not report.applied and report.facts_touched > 0
    assert out.updates == [] and part.facts() == [] and service.counts.passes == 0


def test_poll_passes_once_enough_results_wait_or_an_override(part, out, tmp_path):
    service = service_on(part, out, tmp_path, pass_after_new_events=10)
    results(part, 0, 9)
    assert service.poll() is None and out.updates == []
    results(part, 9, 1)
    assert service.poll().events_read == 10 and len(out.updates) == 1
    # Frozen: waiting results bring no pass, an override does.
    assert service.override(FREEZE, "alice", "k1", "hold still").success
    assert service.frozen and len(out.updates) == 2
    results(part, 100, 20)
    assert service.poll() is None and len(out.updates) == 2


def test_past_the_growth_limit_passes_pause_counted_and_logged_once(part, out, tmp_path):
    service = service_on(part, out, tmp_path, growth_limit_mb=1e-6)
    results(part, 0, 5)
    assert service.run_pass() is None and service.run_pass() is None
    assert service.counts.paused_passes == 2 and part.facts() == []
    assert "consolidation paused" in service.last_error
    assert len(out.logged("pass paused:")) == 1  # a repeated failure, logged once
    level, message = service.status()
    assert level == WARN and "growth limit" in message
    assert service.run_pass(apply=False).facts_touched > 0  # a dry run still answers


def test_a_pass_of_another_process_in_between_reloads_the_facts(part, out, tmp_path):
    service = service_on(part, out, tmp_path)
    results(part, 0, 6)
    service.run_pass()
    results(part, 10, 6, success=False)
    other = consolidation_pass(part)  # `robot-memory consolidate`, say
    assert service.facts_if_stale() is not None
    assert service.facts_run_event_id == other.run_event_id
    assert service.facts_if_stale() is None
    service.facts_run_event_id = out.updates[0].run_event_id  # as before the catch-up
    results(part, 20, 6)
    report = service.run_pass()
    update = out.updates[-1]
    assert update.previous_run_event_id == other.run_event_id
    assert update.reloaded is not None and update.run_event_id == report.run_event_id
    assert by_key(update.reloaded).keys() <= by_key(part.facts()).keys()


def test_retention_compacts_before_the_pass(part, out, tmp_path):
    service = service_on(part, out, tmp_path, retain_events=10, compact_every_events=10)
    results(part, 0, 40)
    service.run_pass()  # folds the results: nothing consolidated to compact before it
    results(part, 40, 5)
    service.run_pass()
    assert service.counts.compactions == 1 and service.compaction_error == ""
    assert list((tmp_path / "archives").iterdir())
    assert [e for e in part.events() if e.kind == COMPACTION]
    assert out.logged("compacted seq")
    assert service.diagnostic_values()["compactions"] == 1


def test_an_override_is_logged_then_applied_by_a_pass(part, out, tmp_path):
    service = service_on(part, out, tmp_path)
    results(part, 0, 6)
    service.run_pass()
    value = {"skill_id": "manipulation.grasp", "target_class": "glass_cup",
             "environment": "sim_relaxed", "recommended_parameters": {"force_n": {"median": 12}}}
    outcome = service.override(OPERATOR_FACT, "alice", "k1", "bench test", kind=RATE[0],
                               key=RATE[1], value_json=json.dumps(value), confidence=0.9)
    assert outcome.success and outcome.reason == "" and outcome.event_id > 0
    assert outcome.run_event_id == out.updates[-1].run_event_id
    assert by_key(out.updates[-1].changed)[RATE].rule_version == "operator/1"
    assert service.counts.overrides == 1 and out.logged("override operator_fact by 'alice'")


def test_refused_overrides_say_why_and_write_only_a_privacy_record(part, out, tmp_path):
    service = service_on(part, out, tmp_path)
    outside = service.override(RESET_SEMANTIC, "alice", "k1", "start over",
                               archive_path="../elsewhere.json")
    assert not outside.success and "contains '..'" in outside.reason
    unknown = service.override("forget", "alice", "k1", "why not")
    assert not unknown.success and "is not one of" in unknown.reason
    private = service.override(FREEZE, "alice", "k1", "call me at alice.smith@example.com")
    assert not private.success and service.counts.privacy_refused["email"] == 1
    assert [e.kind for e in part.events()] == [PRIVACY_REJECTION]
    assert service.counts.overrides == 0 and out.updates == []
    assert service.diagnostic_values()["refused.privacy_email"] == 1


def test_the_whole_snapshot_waits_for_a_subscriber(part, out, tmp_path):
    service = service_on(part, out, tmp_path)
    assert service.snapshot_after_pass(subscribers=2)
    assert not service.snapshot_behind
    assert not service.snapshot_after_pass(subscribers=0) and service.snapshot_behind
    assert not service.snapshot_on_match(subscribers_added=-1)
    assert service.snapshot_on_match(subscribers_added=1)
    service.snapshot_published()
    assert not service.snapshot_on_match(subscribers_added=1)


def test_a_store_gone_fails_the_pass_and_the_status_says_so(store, part, out, tmp_path):
    service = service_on(part, out, tmp_path)
    results(part, 0, 3)
    store.close()
    (tmp_path / "memory.db").unlink()
    (tmp_path / "memory.db").mkdir()  # no database can be opened there any more
    assert service.run_pass() is None and service.last_error
    level, message = service.status()
    assert level == ERROR and message.startswith("last pass failed: ")
    assert service.poll() is None


def test_detached_it_runs_nothing(part, out, tmp_path):
    service = service_on(part, out, tmp_path)
    assert service.detach() is part and service.partition is None
    assert service.run_pass() is None and service.poll() is None
    assert not service.override(FREEZE, "alice", "k1", "x").success
    assert service.last_error == "" and out.updates == []

"""Rules v1 beyond counting: kinds, decay in event time, contested facts, replay, explain."""

import os
import signal
import subprocess
import sys
import time

import pytest

from helpers import result_event, varied_events
from robot_memory.consolidation import (KNOWLEDGE_CONFLICT, KNOWLEDGE_CONFLICT_RESOLVED,
                                        RulesConfig, consolidation_pass, facts_snapshot,
                                        replay_snapshot)
from robot_memory.grounding.explain import explain_fact, find_fact, format_explanation
from robot_memory.store import MemoryStore

# The rules these tests describe (v2.0's skill rule: test_rules_v2.py).
V1 = "v1.0"

IDENT = "e" * 64
RATE_KEY = "manipulation.grasp + glass_cup + sim_relaxed"


def facts_by_kind(part, kind):
    return {f.key: f for f in part.facts() if f.kind == kind}


@pytest.fixture
def part(db_url):
    return MemoryStore(db_url).partition(IDENT)


def test_four_kinds_from_one_stream(part):
    part.append_many([result_event(i, success=i % 2 == 0, force=10.0 + i, reason="slipped",
                                   zone="shelf_b", observations={"mass_kg": 0.2 + i / 100})
                      for i in range(10)])
    consolidation_pass(part)
    pattern = facts_by_kind(part, "interaction_pattern")[
        "manipulation.grasp + glass_cup + slipped"]
    assert pattern.value["count"] == 5 and pattern.value["share_of_failures"] == 1.0
    assert pattern.value["failure_parameters"]["force_n"]["median"] == 15.0
    mass = facts_by_kind(part, "object_property")["glass_cup + mass_kg"]
    assert mass.value["n"] == 10 and mass.value["mean"] == pytest.approx(0.245)
    zone = facts_by_kind(part, "zone_risk")["zone + shelf_b"]
    assert (zone.value["n"], zone.value["incidents"], zone.value["failure_rate"]) == (10, 5, 0.5)
    assert zone.value["most_common_failure"] == "slipped"


def test_decay_is_in_event_time_and_safety_failures_fade_slower(tmp_path):
    config = RulesConfig(half_life_s=100.0, safety_half_life_s=1000.0, time_bucket_s=1.0,
                         rule_version=V1)
    rates = {}
    for reason in ("slipped", "collision"):
        part = MemoryStore(f"sqlite:///{tmp_path / reason}.db").partition(IDENT)
        part.append_many([result_event(0, success=False, reason=reason) for _ in range(10)]
                         + [result_event(1000 + i * 0.01, success=True) for i in range(10)])
        consolidation_pass(part, config)
        value = facts_by_kind(part, "skill_success_rate")[RATE_KEY].value
        assert value["rate"] == 0.5  # raw counts never decay
        rates[reason] = value["weighted"]["rate"]
    assert rates["slipped"] > 0.99  # 10 half-lives old: nearly forgotten
    assert rates["collision"] == pytest.approx(10 / (10 + 10 * 2 ** -1), abs=1e-3)


def test_contradiction_makes_a_fact_contested_and_agreement_restores_it(part):
    config = RulesConfig(time_bucket_s=1.0, recent_window_s=100.0, rule_version=V1,
                         contest_min_observations=5,
                         contest_z=3.0)
    part.append_many([result_event(t, success=t % 2 == 0) for t in range(40)])
    consolidation_pass(part, config)
    assert facts_by_kind(part, "skill_success_rate")[RATE_KEY].status == "active"

    part.append_many([result_event(200 + t, success=False) for t in range(20)])
    report = consolidation_pass(part, config)
    fact = facts_by_kind(part, "skill_success_rate")[RATE_KEY]
    assert fact.status == "contested" and fact.value["contradiction_test"]["z"] < -3
    conflicts = list(part.events([KNOWLEDGE_CONFLICT]))
    assert [c.payload["fact_key"] for c in conflicts
            if c.payload["fact_kind"] == "skill_success_rate"] == [RATE_KEY]
    assert any(c["fact_key"] == RATE_KEY for c in report.conflicts)
    assert fact.n_observations == 60  # nothing deleted

    part.append_many([result_event(1000 + t, success=t % 2 == 0) for t in range(20)])
    consolidation_pass(part, config)
    assert facts_by_kind(part, "skill_success_rate")[RATE_KEY].status == "active"
    resolved = [e for e in part.events([KNOWLEDGE_CONFLICT_RESOLVED])
                if e.payload["fact_key"] == RATE_KEY]
    assert resolved and resolved[0].payload["status"] == {"from": "contested", "to": "active"}


def test_replay_rebuilds_the_past_without_touching_the_store(part):
    config = RulesConfig(time_bucket_s=1.0, recent_window_s=100.0, rule_version=V1)
    snapshots, last_ids = [], []
    for phase in range(3):
        events = part.append_many([result_event(phase * 300 + t, success=(t + phase) % 3 != 0)
                                   for t in range(30)])
        consolidation_pass(part, config)
        snapshots.append(facts_snapshot(part))
        last_ids.append(events[-1].seq)
    head = part.head()
    for phase in range(3):
        assert replay_snapshot(part, config, until_seq=last_ids[phase]) == snapshots[phase]
    assert replay_snapshot(part, config, until_stamp_ns=int(329e9)) == snapshots[1]
    assert part.head() == head


def test_explain_lists_supporting_events_and_runs(part):
    part.append_many([result_event(i, success=i >= 4, force=25.0 if i >= 4 else 5.0)
                      for i in range(16)])
    report = consolidation_pass(part)
    fact = find_fact(part, kind="skill_success_rate", key=RATE_KEY)
    explanation = explain_fact(part, fact)
    support = explanation["supporting_events"]
    assert support["outcomes"] == {"success": 12, "failure": 4}
    assert support["parameters"]["force_n"] == {"5.0": 4, "25.0": 12}
    assert len(support["event_ids"]) == 16
    assert [r["event_id"] for r in explanation["runs"]] == [report.run_event_id]
    text = format_explanation(explanation)
    assert "supported by 16 execution results: 12 successes, 4 failures" in text
    pattern = find_fact(part, kind="interaction_pattern",
                        key="manipulation.grasp + glass_cup + slipped")
    assert explain_fact(part, pattern)["supporting_events"]["count"] == 4


def test_pass_killed_at_any_moment_is_redone_exactly(tmp_path):
    events = varied_events(20000)
    reference = MemoryStore(f"sqlite:///{tmp_path / 'reference.db'}").partition(IDENT)
    reference.append_many(events)
    consolidation_pass(reference)

    url = f"sqlite:///{tmp_path / 'killed.db'}"
    victim = MemoryStore(url).partition(IDENT)
    victim.append_many(events)
    command = [sys.executable, "-m", "robot_memory.cli", "consolidate", "--apply", "--db", url,
               "--identity", IDENT]
    kills = 0
    for delay in (0.3, 0.6, 0.9, 1.2):
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            kills += 1
        process.wait()
    assert kills >= 1, "every pass finished before the kill: make the store larger"
    consolidation_pass(victim)
    assert facts_snapshot(victim) == facts_snapshot(reference)
    assert consolidation_pass(victim).facts_touched == 0

"""The lineage of an action (`explain --intent`): the consultations made for an intent,
the results carrying it and the facts those moved, read through the intent index on a
real SQLite store, with no scan of the log."""

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
from helpers import result_event, varied_events
from sqlalchemy import event as sa_event

from robot_memory.consolidation import consolidation_pass
from robot_memory.event_kinds import FACT_CONSULTATION
from robot_memory.grounding.audit import AuditWriter, consultation_event
from robot_memory.grounding.index import GroundingIndex
from robot_memory.grounding.lineage import IntentNotFound, explain_intent, format_lineage
from robot_memory.grounding.request import GroundingRequest
from robot_memory.manifest import load_manifest
from robot_memory.retention.compaction import compact
from robot_memory.store import MemoryStore, NewEvent
from robot_memory.store.schema import intent_events

IDENT = "a" * 64


def with_intent(event: NewEvent, intent: str) -> NewEvent:
    return event._replace(payload={**event.payload, "intent_id": intent})


def ask(partition, writer: AuditWriter, intent: str, stamp_ns: int, number: int,
        skill: str = "manipulation.grasp", target: str = "glass_cup"):
    """A planner's `ground` call as the grounding server makes it: answered from an index
    of the stored facts, audited by the real writer."""
    index = GroundingIndex(partition.identity_hash, partition.facts())
    answer = index.lookup(GroundingRequest(skill, target, "sim_relaxed"))
    request = SimpleNamespace(skill_id=skill, target_class=target, environment="sim_relaxed",
                              fact_kinds=[], allow_analogies=False, allow_priors=False,
                              requester="planner", intent_id=intent)
    writer.submit(consultation_event(request, answer, f"c{number}", stamp_ns))
    return answer


def planner_loop(partition) -> tuple:
    """History, a pass, then intent pick-7: two consultations, a failed and a successful
    attempt; other intents around it; a pass after. Returns the answers served."""
    partition.append_many(varied_events(40) + [result_event(100 + i) for i in range(6)])
    consolidation_pass(partition)
    writer = AuditWriter(partition, flush_period_s=60.0)
    first = ask(partition, writer, "pick-7", 200 * 10**9, 1)
    ask(partition, writer, "pick-8", 201 * 10**9, 2)
    writer.close()
    partition.append_many([with_intent(result_event(210, success=False), "pick-7"),
                           with_intent(result_event(211, target="object_3"), "pick-8")])
    writer = AuditWriter(partition, flush_period_s=60.0)
    second = ask(partition, writer, "pick-7", 220 * 10**9, 3)
    writer.close()
    partition.append_many([with_intent(result_event(230), "pick-7")])
    consolidation_pass(partition)
    return first, second


def test_the_lineage_joins_consultations_results_runs_and_facts(db_url):
    partition = MemoryStore(db_url).partition(IDENT)
    first, second = planner_loop(partition)
    lineage = explain_intent(partition, "pick-7")
    assert lineage["intent_id"] == "pick-7"
    # Every consultation for the intent, with what was served and the rule versions.
    consultations = lineage["consultations"]
    assert [c["consultation_id"] for c in consultations] == ["c1", "c3"]
    for entry, answer in zip(consultations, (first, second)):
        assert entry["status"] == answer.status and entry["requester"] == "planner"
        assert [(f["fact_id"], f["kind"], f["key"], f["rule_version"]) for f in entry["facts"]] \
            == [(f.id, f.kind, f.key, f.rule_version) for f in answer.facts]
        assert entry["facts"]  # the history made facts to serve
    # Every result carrying it, in chain order, each folded by the last pass.
    results = lineage["results"]
    assert [(r["success"], r["failure_reason"]) for r in results] == \
        [(False, "slipped"), (True, "")]
    run = partition.latest_event("consolidation_run")
    assert [r["folded_by_run"] for r in results] == [run.id, run.id]
    assert [run_entry["event_id"] for run_entry in lineage["runs"]] == [run.id]
    # The facts they moved: those of the run the result supports, as they stand now.
    skill_key = "manipulation.grasp + glass_cup + sim_relaxed"
    for result in results:
        assert {"kind": "skill_success_rate", "key": skill_key} in result["moved_facts"]
        assert all(f"{m['kind']}|{m['key']}" in run.payload["touched_facts"]
                   for m in result["moved_facts"])
    now = {(f["kind"], f["key"]): f for f in lineage["facts"]}
    stored = {(f.kind, f.key): f for f in partition.facts()}
    assert now[("skill_success_rate", skill_key)]["n_observations"] == \
        stored[("skill_success_rate", skill_key)].n_observations
    # Nothing of the other intent.
    assert all(r["target_class"] == "glass_cup" for r in results)
    text = format_lineage(lineage)
    assert "2 grounding consultation(s)" in text and "2 execution result(s)" in text
    assert f"folded by run {run.id}" in text


def test_a_result_no_pass_has_read_says_so(db_url):
    partition = MemoryStore(db_url).partition(IDENT)
    partition.append_many([with_intent(result_event(1), "later")])
    lineage = explain_intent(partition, "later")
    assert lineage["results"][0]["folded_by_run"] is None
    assert lineage["results"][0]["moved_facts"] == [] and lineage["facts"] == []
    assert "not consolidated yet" in format_lineage(lineage)


def test_an_unknown_intent_is_refused_by_name(db_url):
    partition = MemoryStore(db_url).partition(IDENT)
    partition.append_many([with_intent(result_event(1), "known")])
    with pytest.raises(IntentNotFound, match="'unknown'"):
        explain_intent(partition, "unknown")


def test_the_lookup_reads_the_index_and_scans_no_table(db_url):
    """Every statement the lineage runs searches by key: SQLite's plan for it names no
    SCAN of a table (a full read of the log or of an index)."""
    store = MemoryStore(db_url)
    partition = store.partition(IDENT)
    planner_loop(partition)
    partition.append_many([with_intent(e, f"other-{i}") for i, e in enumerate(varied_events(300))])
    consolidation_pass(partition)
    statements = []

    def seen(conn, cursor, statement, parameters, context, executemany):
        statements.append((statement, parameters))
    sa_event.listen(store.engine, "before_cursor_execute", seen)
    explain_intent(partition, "pick-7")
    sa_event.remove(store.engine, "before_cursor_execute", seen)
    selects = [(s, p) for s, p in statements if s.lstrip().upper().startswith("SELECT")]
    assert any("intent_events" in s for s, _ in selects)
    with store.read() as conn:
        for statement, parameters in selects:
            plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
            scans = [row[-1] for row in plan if row[-1].startswith("SCAN")]
            assert not scans, (statement, plan)


def test_the_index_holds_the_results_and_consultations_that_name_an_intent(db_url):
    store = MemoryStore(db_url)
    partition = store.partition(IDENT)
    partition.append_many([with_intent(result_event(1), "i1"), result_event(2),
                           NewEvent(FACT_CONSULTATION, {"intent_id": "i1"}, 3),
                           NewEvent(FACT_CONSULTATION, {"intent_id": ""}, 4),
                           NewEvent("override", {"intent_id": "i1"}, 5)])
    with store.read() as conn:
        rows = conn.execute(intent_events.select().order_by(intent_events.c.seq)).all()
    assert [(r.intent_id, r.seq) for r in rows] == [("i1", 1), ("i1", 3)]


def test_a_compaction_removes_an_intent_row_with_its_event(db_url, tmp_path):
    store = MemoryStore(db_url)
    partition = store.partition(IDENT)
    partition.append_many([with_intent(result_event(i), "old") for i in range(20)]
                          + [with_intent(result_event(100), "new")])
    consolidation_pass(partition)
    compact(partition, 20, tmp_path / "archive")
    with store.read() as conn:
        left = {r.intent_id for r in conn.execute(intent_events.select()).all()}
    assert left == {"new"}
    with pytest.raises(IntentNotFound, match="compacted"):
        explain_intent(partition, "old")
    assert "compacted" in format_lineage(explain_intent(partition, "new"))


def test_explain_intent_on_the_command_line(db_url, manifest_file):
    identity = load_manifest(manifest_file).identity_hash()
    planner_loop(MemoryStore(db_url).partition(identity))
    base = [sys.executable, "-m", "robot_memory.cli", "explain", "--db", db_url,
            "--manifest", str(manifest_file), "--intent", "pick-7"]
    text = subprocess.run(base, capture_output=True, text=True)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("intent pick-7") and "consultation c3" in text.stdout
    as_json = subprocess.run(base + ["--json"], capture_output=True, text=True)
    assert as_json.returncode == 0, as_json.stderr
    lineage = json.loads(as_json.stdout)
    assert [r["success"] for r in lineage["results"]] == [False, True]
    assert [c["consultation_id"] for c in lineage["consultations"]] == ["c1", "c3"]


def test_an_intent_reused_by_every_request_lists_its_newest_events_and_counts_the_rest(
        db_url, monkeypatch):
    """A planner that never changes its intent id: the lineage stays bounded (the newest
    MAX_LINEAGE_EVENTS events, in chain order) and says how many older ones it leaves."""
    from robot_memory.grounding import lineage as lineage_module
    monkeypatch.setattr(lineage_module, "MAX_LINEAGE_EVENTS", 5)
    partition = MemoryStore(db_url).partition(IDENT)
    partition.append_many([with_intent(result_event(i), "always") for i in range(12)])
    lineage = explain_intent(partition, "always")
    assert [r["seq"] for r in lineage["results"]] == list(range(8, 13))
    assert lineage["older_events_not_listed"] == 7
    assert "7 older ones are not" in format_lineage(lineage)
    partition.append_many([with_intent(result_event(20), "few")])
    assert explain_intent(partition, "few")["older_events_not_listed"] == 0

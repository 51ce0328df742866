"""One consolidation pass over one identity's new events.

Read the events past the checkpoint, fold them into per-key states, render facts,
and write the changed facts, the states and a `consolidation_run` event in ONE
transaction: a pass killed at any point leaves either all of it or none of it, so
the next pass redoes exactly the same range and nothing is counted twice.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, insert, select, update

from robot_memory.canonical import canonical_json
from robot_memory.consolidation.rules import (RULE_VERSION, RULES, RenderedFact, RulesConfig,
                                              SkipRecord)
from robot_memory.records import InvalidRecord, validate_record
from robot_memory.store.episodic import FactRow, NewEvent, Partition
from robot_memory.store.schema import consolidation_state, semantic_facts

EXECUTION_RESULT = "execution_result"
CONSOLIDATION_RUN = "consolidation_run"


class ConcurrentPass(Exception):
    """Raised when another pass committed for this identity while this one was computing."""


@dataclass(frozen=True)
class FactChange:
    kind: str
    key: str
    old: FactRow | None
    new: RenderedFact


@dataclass
class PassReport:
    identity_hash: str
    rule_version: str = RULE_VERSION
    first_seq: int = 0
    last_seq: int = 0
    events_read: int = 0
    facts_touched: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    changes: list[FactChange] = field(default_factory=list)
    run_event_id: int | None = None
    duration_s: float = 0.0
    applied: bool = False

    def summary(self) -> str:
        skipped = sum(self.skipped.values())
        return (f"consolidation pass: read {self.events_read} events (seq {self.first_seq}.."
                f"{self.last_seq}), touched {self.facts_touched} facts, skipped {skipped}, "
                f"took {self.duration_s * 1000:.1f} ms")


def checkpoint(partition: Partition, conn: Connection) -> tuple[int, int]:
    """(seq of the last consolidation_run event, last seq it processed); (0, 0) before any."""
    run = partition.latest_event(CONSOLIDATION_RUN, conn=conn)
    if run is None:
        return 0, 0
    return run.seq, int(run.payload["last_seq"])


def _load_states(partition: Partition, conn: Connection, kind: str,
                 groups: set[str]) -> dict[str, dict[str, Any]]:
    if not groups:
        return {}
    rows = conn.execute(select(consolidation_state.c.fact_key, consolidation_state.c.state_json)
                        .where(consolidation_state.c.identity_hash == partition.identity_hash,
                               consolidation_state.c.fact_kind == kind,
                               consolidation_state.c.fact_key.in_(sorted(groups))))
    return {key: json.loads(text) for key, text in rows}


def _fact_row_values(fact: RenderedFact) -> dict[str, Any]:
    return {"fact_value_json": canonical_json(fact.value), "status": fact.status,
            "confidence": fact.confidence, "n_observations": fact.n_observations,
            "rule_version": RULE_VERSION,
            "last_supporting_event_id": fact.last_supporting_event_id,
            "last_updated_ns": fact.last_updated_ns}


def _unchanged(old: FactRow, fact: RenderedFact) -> bool:
    return (old.value_json == canonical_json(fact.value) and old.status == fact.status
            and old.confidence == fact.confidence and old.n_observations == fact.n_observations
            and old.last_supporting_event_id == fact.last_supporting_event_id)


def consolidation_pass(partition: Partition, config: RulesConfig = RulesConfig(), *,
                       apply: bool = True, stamp_ns: int | None = None,
                       max_events: int | None = None) -> PassReport:
    """Run one pass; with apply=False it only reports what it would change (dry run)."""
    started = time.perf_counter()
    report = PassReport(partition.identity_hash)
    with partition.store.read() as conn:
        run_seq, done_seq = checkpoint(partition, conn)
        head_seq = partition.head()[0]
        deltas: dict[tuple[str, str], list] = {}
        last_stamp = 0
        for ev in partition.events([EXECUTION_RESULT], after_seq=done_seq, until_seq=head_seq,
                                   conn=conn):
            if max_events is not None and report.events_read >= max_events:
                head_seq = ev.seq - 1
                break
            report.events_read += 1
            report.first_seq = report.first_seq or ev.seq
            last_stamp = max(last_stamp, ev.stamp_ns)
            try:
                record = validate_record({**ev.payload, "stamp_ns": ev.stamp_ns})
            except InvalidRecord as exc:
                report.skipped[f"invalid_payload:{exc.reason}"] = (
                    report.skipped.get(f"invalid_payload:{exc.reason}", 0) + 1)
                continue
            for rule in RULES:
                try:
                    group = rule.group(record)
                except SkipRecord as skip:
                    name = f"{rule.kind}:{skip.reason}"
                    report.skipped[name] = report.skipped.get(name, 0) + 1
                    continue
                deltas.setdefault((rule.kind, group), []).append((record, ev.id, ev.stamp_ns))
        report.last_seq = head_seq
        if report.events_read == 0:
            report.duration_s = time.perf_counter() - started
            return report

        states: dict[tuple[str, str], dict[str, Any]] = {}
        for rule in RULES:
            groups = {g for (kind, g) in deltas if kind == rule.kind}
            for group, state in _load_states(partition, conn, rule.kind, groups).items():
                states[(rule.kind, group)] = state
        existing = {(f.kind, f.key): f for f in partition.facts(conn=conn)}

    rule_by_kind = {rule.kind: rule for rule in RULES}
    new_state_keys = set()
    for (kind, group), items in sorted(deltas.items()):
        if (kind, group) not in states:
            states[(kind, group)] = {}
            new_state_keys.add((kind, group))
        for record, event_id, stamp_ns_ in items:
            rule_by_kind[kind].add(states[(kind, group)], record, event_id, stamp_ns_)
        for fact in rule_by_kind[kind].render(group, states[(kind, group)], config):
            old = existing.get((fact.kind, fact.key))
            if old is None or not _unchanged(old, fact):
                report.changes.append(FactChange(fact.kind, fact.key, old, fact))
    report.facts_touched = len(report.changes)

    if apply:
        with partition.store.write() as conn:
            if checkpoint(partition, conn)[0] != run_seq:
                raise ConcurrentPass("another consolidation pass committed first; retry")
            _write(partition, conn, states, new_state_keys, deltas.keys(), report)
            run_payload = {"rule_version": RULE_VERSION, "first_seq": report.first_seq,
                           "last_seq": report.last_seq, "events_read": report.events_read,
                           "facts_touched": report.facts_touched,
                           "skipped": dict(sorted(report.skipped.items())),
                           "touched_facts": sorted(f"{c.kind}|{c.key}" for c in report.changes)}
            run_event = partition.append_in(
                conn, [NewEvent(CONSOLIDATION_RUN, run_payload,
                                stamp_ns if stamp_ns is not None else last_stamp)])[0]
            report.run_event_id = run_event.id
            report.applied = True
    report.duration_s = time.perf_counter() - started
    return report


def _write(partition: Partition, conn: Connection, states, new_state_keys, touched_groups,
           report: PassReport) -> None:
    ident = partition.identity_hash
    for kind, group in sorted(touched_groups):
        text = canonical_json(states[(kind, group)])
        if (kind, group) in new_state_keys:
            conn.execute(insert(consolidation_state).values(
                identity_hash=ident, fact_kind=kind, fact_key=group, state_json=text))
        else:
            conn.execute(update(consolidation_state).where(
                consolidation_state.c.identity_hash == ident,
                consolidation_state.c.fact_kind == kind,
                consolidation_state.c.fact_key == group).values(state_json=text))
    for change in report.changes:
        values = _fact_row_values(change.new)
        if change.old is None:
            conn.execute(insert(semantic_facts).values(
                identity_hash=ident, fact_kind=change.kind, fact_key=change.key, **values))
        else:
            conn.execute(update(semantic_facts).where(
                semantic_facts.c.identity_hash == ident,
                semantic_facts.c.fact_kind == change.kind,
                semantic_facts.c.fact_key == change.key).values(**values))


def facts_snapshot(partition: Partition) -> str:
    """Canonical JSON of an identity's knowledge: what must be byte-equal across replays.

    Row ids and supporting event ids depend on insertion order, so they are provenance,
    not part of the snapshot.
    """
    return canonical_json([
        {"kind": f.kind, "key": f.key, "status": f.status, "confidence": f.confidence,
         "n_observations": f.n_observations, "rule_version": f.rule_version,
         "last_updated_ns": f.last_updated_ns, "value": f.value}
        for f in partition.facts()])

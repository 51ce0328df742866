"""TEST ORACLE ONLY: the per-event consolidation engine that the set-based pass in
robot_memory/consolidation/consolidation_pass.py replaced. It decodes every payload and
folds one record at a time through the rules' per-record writing (oracle_rules.py),
rendering with the package's rules; the equivalence tests run it beside the new engine
and require byte-equal facts and states. Not used by the package. Amendments: its replay
resolves them over the whole log (resolve_amendments) and counts each amended attempt
once, with its final outcome; its incremental pass counts no amendment as an attempt but
does not resolve them.

One consolidation pass over one identity's new events.

Read the events past the checkpoint, fold them into per-key states, render facts,
and write the changed facts, the states, any knowledge_conflict events and the
`consolidation_run` event in ONE transaction: a pass killed at any point leaves all
of it or none of it, so the next pass redoes exactly the same range, counting nothing
twice. Another pass that commits first makes this one raise ConcurrentPass.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

from sqlalchemy import Connection, bindparam, delete, insert, select, update

from robot_memory.canonical import canonical_json
from robot_memory.consolidation.checkpoint import read_overrides as override_events
# The snapshot format is shared: the engines are compared through it.
from robot_memory.consolidation.consolidation_pass import (  # noqa: F401
    facts_snapshot, snapshot_entry)
from robot_memory.consolidation.override_plan import fact_as_rendered, plan_overrides
from robot_memory.consolidation.rules import (DEFAULT_RULE_VERSION, RULE_VERSIONS, RULES,
                                              RULES_BY_KIND, STATUS_CONTESTED,
                                              STATUS_INVALIDATED, RenderedFact, RulesConfig,
                                              rules_of_store)
from robot_memory.event_kinds import (CONSOLIDATION_RUN, EXECUTION_RESULT, KNOWLEDGE_CONFLICT,
                                      KNOWLEDGE_CONFLICT_RESOLVED, OVERRIDE)
from robot_memory.execution_result import InvalidRecord, record_from_payload
from robot_memory.store import (RUN_DIGEST_KEY, ConcurrentPass, FactRow, NewEvent, Partition,
                                stored_tier_digest)
from robot_memory.store.schema import consolidation_state, semantic_facts

from oracle_rules import PER_RECORD_BY_VERSION, SkipRecord

CHUNK = 5000

GroupId = tuple[str, str]  # (fact kind, group key)


@dataclass(frozen=True)
class FactChange:
    kind: str
    key: str
    old: FactRow | None
    new: RenderedFact


@dataclass
class PassReport:
    identity_hash: str
    rule_version: str = DEFAULT_RULE_VERSION
    first_seq: int = 0
    last_seq: int = 0
    events_read: int = 0
    facts_touched: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    changes: list[FactChange] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    run_event_id: int | None = None
    # events.id of the run this pass builds on (0 before any): a delta follows it.
    previous_run_event_id: int = 0
    duration_s: float = 0.0
    applied: bool = False
    frozen: bool = False  # an operator froze consolidation: results after it wait
    overrides_applied: int = 0

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def summary(self) -> str:
        frozen = " [consolidation FROZEN by an operator]" if self.frozen else ""
        return (f"consolidation pass: read {self.events_read} events (seq {self.first_seq}.."
                f"{self.last_seq}), applied {self.overrides_applied} overrides, touched "
                f"{self.facts_touched} facts, skipped {sum(self.skipped.values())}, conflicts "
                f"{len(self.conflicts)}, took {self.duration_s * 1000:.1f} ms{frozen}")


class Folder:
    """Folds events into per-group states; `load` fetches stored states of groups seen
    for the first time (one query per chunk), so memory holds only touched groups."""

    def __init__(self, config: RulesConfig, report: PassReport,
                 load: Callable[[str, set[str]], dict[str, dict]] | None = None):
        self.config = config
        self.report = report
        self.load = load
        self.states: dict[GroupId, dict[str, Any]] = {}
        self.stored: set[GroupId] = set()  # groups that already had a row before this pass
        # The version's rules: this module's RULES for the default one (a test may swap
        # them), the package's set for another.
        if config.rule_version == DEFAULT_RULE_VERSION:
            self.rules, self.by_kind = RULES, RULES_BY_KIND
        else:
            self.rules = rules_of_store(config.rule_version, config)[1]
            self.by_kind = {rule.kind: rule for rule in self.rules}
        self.per_record = PER_RECORD_BY_VERSION[config.rule_version]

    def fold(self, rows: Iterable[tuple[int, int, int, str]],
             moves: dict[int, tuple[tuple[bool, str], list]] | None = None) -> None:
        """Fold (id, seq, stamp_ns, payload_json) rows of execution results. An amendment
        is no attempt of its own; `moves` (resolve_amendments): the original's event id
        -> the final outcome its attempt counts, folded as the original under its own
        outcome, then that outcome taken back and the final one added, both without
        support; every outcome an amendment of it gave is folded 0 times (its group
        made, as the pass makes it whatever the order)."""
        chunk: list[tuple[GroupId, Any, int, int, bool]] = []
        for event_id, _seq, stamp_ns, payload_json in rows:
            self.report.events_read += 1
            payload = json.loads(payload_json)
            try:
                record = record_from_payload(payload, stamp_ns)
            except InvalidRecord as exc:
                self.report.skip(f"invalid_payload:{exc.reason}")
                continue
            if payload.get("amends"):
                continue
            for rule in self.rules:
                try:
                    items = self.per_record[rule.kind].extract(record)
                except SkipRecord as skip:
                    self.report.skip(f"{rule.kind}:{skip.reason}")
                    continue
                kind = rule.kind
                for group, item in items:
                    chunk.append(((kind, group), item, event_id, 1, True))
            move = (moves or {}).get(event_id)
            if move is not None:
                final_outcome, touched = move
                final = replace(record, success=final_outcome[0],
                                failure_reason=final_outcome[1])
                changes = [] if final_outcome == (record.success, record.failure_reason) \
                    else [(-1, record), (1, final)]
                changes += [(0, replace(record, success=success, failure_reason=reason))
                            for success, reason in touched]
                for count, moved in changes:
                    for rule in self.rules:
                        try:
                            items = self.per_record[rule.kind].extract(moved)
                        except SkipRecord:
                            continue
                        chunk += [((rule.kind, group), item, 0, count, False)
                                  for group, item in items]
            if len(chunk) >= CHUNK:
                self._fold_chunk(chunk)
                chunk = []
        self._fold_chunk(chunk)

    def _fold_chunk(self, chunk: list[tuple[GroupId, Any, int, int, bool]]) -> None:
        missing = {gid for gid, *_ in chunk if gid not in self.states}
        if missing and self.load is not None:
            for kind in {k for k, _ in missing}:
                loaded = self.load(kind, {g for k, g in missing if k == kind})
                for group, state in loaded.items():
                    self.states[(kind, group)] = state
                    self.stored.add((kind, group))
        for gid, item, event_id, count, support in chunk:
            self.per_record[gid[0]].fold(self.states.setdefault(gid, {}), item, event_id,
                                         self.config, count, support)

    def render(self, gid: GroupId) -> list[RenderedFact]:
        return self.by_kind[gid[0]].render(gid[1], self.states[gid], self.config)


def resolve_amendments(rows: list[tuple[int, int, int, str]]
                       ) -> dict[int, tuple[tuple[bool, str], list[tuple[bool, str]]]]:
    """The final outcome of every amended attempt of these (id, seq, stamp_ns,
    payload_json) rows (a whole log, in chain order), and the outcomes of all its
    amendments, by its original's event id. The final one: the amendment naming the
    attempt, with the original's skill, target, environment and zone, of the latest
    stamp, ties broken by SHA-256("<stamp>:<payload_json>"). An attempt is named by the
    attempt_id of the first result giving it, or as "event:<id>" of an earlier result
    (its attempt_id's name, if it has one); an amendment names no amendment."""
    originals: dict[str, int] = {}  # attempt name -> the original's event id
    records, amendments = {}, []  # event id -> record; (name, rank, record)
    for event_id, _seq, stamp_ns, payload_json in rows:
        payload = json.loads(payload_json)
        try:
            record = record_from_payload(payload, stamp_ns)
        except InvalidRecord:
            continue
        amends, attempt_id = payload.get("amends", ""), payload.get("attempt_id", "")
        if not amends:
            records[event_id] = (record, attempt_id)
            if attempt_id:
                originals.setdefault(attempt_id, event_id)
            continue
        name = amends
        if amends.startswith("event:"):
            named = records.get(int(amends[len("event:"):]))
            if named is None:  # no earlier result (or an amendment)
                continue
            name = named[1] or amends
            originals.setdefault(name, int(amends[len("event:"):]))
        rank = (stamp_ns, hashlib.sha256(f"{stamp_ns}:{payload_json}".encode()).hexdigest())
        amendments.append((name, rank, record))
    moves = {}
    for name, original_id in originals.items():
        original = records[original_id][0]
        fields = (original.skill_id, original.target_class, original.environment, original.zone)
        matching = [(rank, record) for named, rank, record in amendments if named == name and
                    (record.skill_id, record.target_class, record.environment,
                     record.zone) == fields]
        if matching:
            final = max(matching, key=lambda m: m[0])[1]
            moves[original_id] = ((final.success, final.failure_reason),
                                  [(r.success, r.failure_reason) for _, r in matching])
    return moves


def checkpoint(partition: Partition, conn: Connection) -> tuple[int, int, int]:
    """(seq and id of the last consolidation_run event, last seq it processed);
    zeros before any pass."""
    run = partition.latest_event(CONSOLIDATION_RUN, conn=conn)
    if run is None:
        return 0, 0, 0
    return run.seq, run.id, int(run.payload["last_seq"])


def overrides_waiting(partition: Partition, conn: Connection) -> bool:
    """Is there an override event no pass has applied yet?"""
    latest = partition.latest_event(OVERRIDE, conn=conn)
    if latest is None:
        return False
    run = partition.latest_event(CONSOLIDATION_RUN, conn=conn)
    applied = int(run.payload.get("override_seq", run.payload["last_seq"])) if run else 0
    return latest.seq > applied


def latest_run_id(partition: Partition, conn: Connection) -> int:
    """events.id of the newest consolidation_run (0 before any): the facts' version."""
    run = partition.latest_event(CONSOLIDATION_RUN, conn=conn)
    return run.id if run else 0


def _state_loader(partition: Partition, conn: Connection):
    def load(kind: str, groups: set[str]) -> dict[str, dict]:
        state = consolidation_state.c
        rows = conn.execute(select(state.fact_key, state.state_json)
                            .where(consolidation_state.c.identity_hash == partition.identity_hash,
                                   consolidation_state.c.fact_kind == kind,
                                   consolidation_state.c.fact_key.in_(sorted(groups))))
        return {key: json.loads(text) for key, text in rows}
    return load


def _same(old: FactRow, fact: RenderedFact) -> bool:
    return (old.value_json == canonical_json(fact.value) and old.status == fact.status
            and old.rule_version == fact.rule_version
            and old.confidence == fact.confidence and old.n_observations == fact.n_observations
            and old.last_supporting_event_id == fact.last_supporting_event_id
            and old.last_updated_ns == fact.last_updated_ns)


def _conflict_event(change: FactChange) -> dict[str, Any] | None:
    was = change.old.status if change.old else None
    now = change.new.status
    if STATUS_INVALIDATED in (was, now) or change.new.rule_version not in RULE_VERSIONS:
        return None  # an operator's doing, logged as the override itself
    if now == STATUS_CONTESTED and was != STATUS_CONTESTED:
        kind = KNOWLEDGE_CONFLICT
    elif was == STATUS_CONTESTED and now != STATUS_CONTESTED:
        kind = KNOWLEDGE_CONFLICT_RESOLVED
    else:
        return None
    return {"event_kind": kind, "fact_kind": change.kind, "fact_key": change.key,
            "status": {"from": was, "to": now}, "test": change.new.conflict}


def consolidation_pass(partition: Partition, config: RulesConfig = RulesConfig(), *,
                       apply: bool = True, stamp_ns: int | None = None,
                       max_events: int | None = None, record_digest: bool = True
                       ) -> PassReport:
    """Run one pass; with apply=False only report what it would change (dry run). The
    run records the digest of the tier as written, every row read back and hashed (the
    oracle of the pass's incremental digest); record_digest=False writes runs as the
    releases before tier digests did."""
    started = time.perf_counter()
    report = PassReport(partition.identity_hash)
    with partition.store.read() as conn:
        run = partition.latest_event(CONSOLIDATION_RUN, conn=conn)
        run_seq, report.previous_run_event_id, done_seq = (
            (run.seq, run.id, int(run.payload["last_seq"])) if run else (0, 0, 0))
        # The store keeps the version its states were built with.
        config = rules_of_store(run.payload["rule_version"] if run else None, config)[0]
        report.rule_version = config.rule_version
        done_overrides = int(run.payload.get("override_seq", done_seq)) if run else 0
        until = partition.head(conn)[0]
        if max_events is not None:
            until = min(until, done_seq + max_events)
        overrides = override_events(partition, conn, until)
        plan = plan_overrides(overrides)
        new_overrides = [o for o in overrides if o.seq > done_overrides]
        reset_pending = plan.reset_seq > done_overrides
        results_from = max(done_seq, plan.reset_seq)
        results_until = until if plan.frozen_since is None else \
            max(results_from, min(until, plan.frozen_since))
        report.frozen = plan.frozen_since is not None
        seen = {"first_seq": 0, "last_stamp": 0}

        def streamed():  # note the range while folding, without holding the events
            for row in partition.payload_rows(EXECUTION_RESULT, results_from, results_until,
                                              conn):
                seen["first_seq"] = seen["first_seq"] or row[1]
                if row[2] > seen["last_stamp"]:
                    seen["last_stamp"] = row[2]
                yield row

        # After a reset nothing learnt before counts: start from empty states.
        folder = Folder(config, report, None if reset_pending else _state_loader(partition, conn))
        folder.fold(streamed())
        report.first_seq, report.last_seq = seen["first_seq"], results_until
        report.overrides_applied = len(new_overrides)
        if report.events_read == 0 and not new_overrides:
            report.last_seq = done_seq
            report.duration_s = time.perf_counter() - started
            return report
        rendered = {(f.kind, f.key): f for gid in sorted(folder.states)
                    for f in folder.render(gid)}
        keys = set(rendered) | plan.keys_changed_after(done_overrides)
        existing = {} if reset_pending else \
            {(f.kind, f.key): f for f in partition.facts_by_key(keys, conn)}

    for key in sorted(keys):
        evidence = rendered.get(key)
        if evidence is None and key in existing:
            evidence = fact_as_rendered(existing[key])
        fact = plan.finalize(key, evidence)
        old = existing.get(key)
        if fact is not None and (old is None or not _same(old, fact)):
            report.changes.append(FactChange(key[0], key[1], old, fact))
    report.facts_touched = len(report.changes)
    report.conflicts = [c for c in map(_conflict_event, report.changes) if c]

    if apply:
        stamp = stamp_ns if stamp_ns is not None else seen["last_stamp"]
        with partition.store.write() as conn:
            if checkpoint(partition, conn)[0] != run_seq:
                raise ConcurrentPass("another consolidation pass committed first; retry")
            if reset_pending:
                _drop_semantic_tier(partition, conn)
            _write_states(partition, conn, folder)
            _write_facts(partition, conn, report.changes)
            audit = [NewEvent(c["event_kind"], {k: v for k, v in c.items() if k != "event_kind"},
                              stamp) for c in report.conflicts]
            digest = {RUN_DIGEST_KEY: stored_tier_digest(partition.identity_hash,
                                                         conn).payload()} \
                if record_digest else {}
            audit.append(NewEvent(CONSOLIDATION_RUN,
                                  {**_run_payload(report), "override_seq": until,
                                   "frozen": report.frozen, "reset": reset_pending,
                                   **digest}, stamp))
            report.run_event_id = partition.append_in(conn, audit)[-1].id
            report.applied = True
    report.duration_s = time.perf_counter() - started
    return report


def _drop_semantic_tier(partition: Partition, conn: Connection) -> None:
    """A reset (archived and logged by the override): derived rows only, never the log."""
    for table in (semantic_facts, consolidation_state):
        conn.execute(delete(table).where(table.c.identity_hash == partition.identity_hash))


def _run_payload(report: PassReport) -> dict[str, Any]:
    return {"rule_version": report.rule_version, "first_seq": report.first_seq,
            "last_seq": report.last_seq, "events_read": report.events_read,
            "facts_touched": report.facts_touched,
            "skipped": dict(sorted(report.skipped.items())),
            "touched_facts": sorted(f"{c.kind}|{c.key}" for c in report.changes)}


def _write_states(partition: Partition, conn: Connection, folder: Folder) -> None:
    ident = partition.identity_hash
    new_rows, changed_rows = [], []
    for (kind, group), state in sorted(folder.states.items()):
        row = {"identity_hash": ident, "fact_kind": kind, "fact_key": group,
               "state_json": canonical_json(state)}
        (changed_rows if (kind, group) in folder.stored else new_rows).append(row)
    if new_rows:
        conn.execute(insert(consolidation_state), new_rows)
    if changed_rows:  # one executemany, not a statement per row
        conn.execute(update(consolidation_state).where(
            consolidation_state.c.identity_hash == bindparam("b_identity"),
            consolidation_state.c.fact_kind == bindparam("b_kind"),
            consolidation_state.c.fact_key == bindparam("b_key"))
            .values(state_json=bindparam("b_state")),
            [{"b_identity": r["identity_hash"], "b_kind": r["fact_kind"],
              "b_key": r["fact_key"], "b_state": r["state_json"]} for r in changed_rows])


def _fact_values(fact: RenderedFact) -> dict[str, Any]:
    return {"fact_value_json": canonical_json(fact.value), "status": fact.status,
            "confidence": fact.confidence, "n_observations": fact.n_observations,
            "rule_version": fact.rule_version,
            "last_supporting_event_id": fact.last_supporting_event_id,
            "last_updated_ns": fact.last_updated_ns}


def _write_facts(partition: Partition, conn: Connection, changes: list[FactChange]) -> None:
    ident = partition.identity_hash
    new_rows = [{"identity_hash": ident, "fact_kind": c.kind, "fact_key": c.key,
                 **_fact_values(c.new)} for c in changes if c.old is None]
    if new_rows:
        conn.execute(insert(semantic_facts), new_rows)
    updates = [{"b_id": c.old.id, **{f"b_{k}": v for k, v in _fact_values(c.new).items()}}
               for c in changes if c.old is not None]
    if updates:
        columns = _fact_values(changes[0].new).keys()
        conn.execute(update(semantic_facts).where(semantic_facts.c.id == bindparam("b_id"))
                     .values({name: bindparam(f"b_{name}") for name in columns}), updates)


def replay_snapshot(partition: Partition, config: RulesConfig = RulesConfig(), *,
                    until_seq: int | None = None, until_stamp_ns: int | None = None) -> str:
    """The facts as they were at a point of the log, rebuilt from the events alone in
    memory (the live store is not touched), overrides applied as the passes apply
    them. Same format as facts_snapshot."""
    report = PassReport(partition.identity_hash)
    with partition.store.read() as conn:
        run = partition.latest_event(CONSOLIDATION_RUN, conn=conn)
        config = rules_of_store(run.payload["rule_version"] if run else None, config)[0]
        folder = Folder(config, report)
        last = until_seq if until_seq is not None else partition.head(conn)[0]
        plan = plan_overrides(override_events(partition, conn, last, until_stamp_ns))
        results_until = last if plan.frozen_since is None else min(last, plan.frozen_since)
        rows = list(partition.payload_rows(EXECUTION_RESULT, plan.reset_seq, results_until,
                                           conn))
        if until_stamp_ns is not None:
            rows = [row for row in rows if row[2] <= until_stamp_ns]
        folder.fold(rows, resolve_amendments(rows))
    rendered = {(f.kind, f.key): f for gid in folder.states for f in folder.render(gid)}
    keys = sorted(set(rendered) | set(plan.operator_facts))
    facts = [f for f in (plan.finalize(key, rendered.get(key)) for key in keys) if f]
    return canonical_json([snapshot_entry(f.kind, f.key, f.status, f.confidence,
                                          f.n_observations, f.rule_version, f.last_updated_ns,
                                          f.value) for f in facts])

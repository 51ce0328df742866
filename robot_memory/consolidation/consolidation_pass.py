"""One consolidation pass over one identity's new events, set-based.

The pass reads straight through:
1. read (one snapshot): the checkpoint, the overrides, the new range of execution
   results aggregated by the database (GROUP BY key, outcome, event-time bucket and
   parameter value: value x count, never one row per event), the stored states of the
   groups it touches and the facts it may change;
2. compute, with no I/O: merge the partial states into the stored ones with integer
   arithmetic, render, apply the overrides, diff;
3. commit: the store writes the states, the changed facts, any knowledge_conflict
   events and the `consolidation_run` event in ONE transaction (Partition.commit_pass);
   the run records the digest of the tier the pass leaves, updated from the previous
   run's with the rows the pass replaces and writes (consolidation/tier_update.py).
A pass killed at any point leaves all of it or none of it, so the next pass redoes
exactly the same range, counting nothing twice. Another pass that commits first makes
this one raise ConcurrentPass.

The rules add the aggregates up (consolidation/partials.py). The per-event engine this
replaced is kept in test/oracle_consolidation.py as the tests' oracle: the facts are
byte-equal, provenance included.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from robot_memory.canonical import canonical_json, plain_canonical_json, plain_json_loads
from robot_memory.consolidation.changes import (FactChange, GroupId, conflict_event,
                                                fact_change, fact_write)
from robot_memory.consolidation.checkpoint import (Checkpoint, read_checkpoint, read_overrides,
                                                   result_range)
from robot_memory.consolidation.override_plan import (IllShaped, OverridePlan,
                                                      fact_as_rendered, plan_overrides)
from robot_memory.consolidation.partials import aggregate
from robot_memory.consolidation.rules import (DEFAULT_RULE_VERSION, RULE_VERSIONS, Partials,
                                              RenderedFact, Rule, RulesConfig,
                                              parameter_bucket_ns, rules_of_store)
from robot_memory.consolidation.rules.base import OneFactPerGroup
from robot_memory.consolidation.tier_update import digest_after, digest_before, stored_states_sum
from robot_memory.event_kinds import CONSOLIDATION_RUN, EXECUTION_RESULT
from robot_memory.store import (RUN_DIGEST_KEY, ConcurrentPass, FactRow, NewEvent, Partition,
                                TierDigest)

__all__ = ["CONSOLIDATION_RUN", "EXECUTION_RESULT", "ConcurrentPass", "FactChange",
           "PassReport", "consolidation_pass", "facts_snapshot", "replay_snapshot"]


@dataclass
class PassReport:
    identity_hash: str
    rule_version: str = DEFAULT_RULE_VERSION  # the rules this pass consolidated with
    # The configured rule version, when the store's states were built by another (the
    # store keeps its own; `consolidate` reports that an upgrade is available).
    upgrade_available: str | None = None
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
    dry_run: bool = False  # the mode asked for: report only, write nothing
    applied: bool = False  # something was written (a run event and what it changed)
    frozen: bool = False  # an operator froze consolidation: results after it wait
    overrides_applied: int = 0
    # Overrides in the log that no pass applies (fact_schemas.py), and facts this pass
    # could not make (kind, key, why): each costs its own fact only, logged by the caller.
    ill_shaped: list[IllShaped] = field(default_factory=list)
    fact_faults: list[tuple[str, str, str]] = field(default_factory=list)

    def skip(self, reason: str, count: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + count

    def summary(self) -> str:
        frozen = " [consolidation FROZEN by an operator]" if self.frozen else ""
        # A rule skips what it cannot use (an event with no observations gives no
        # object_property fact): counted per rule and reason, not events left unread.
        skips = ", ".join(f"{reason} {n}" for reason, n in sorted(self.skipped.items()))
        upgrade = (f" [rules {self.rule_version}; {self.upgrade_available} is configured: "
                   "an upgrade is available]" if self.upgrade_available else "")
        return (f"consolidation pass: read {self.events_read} events (seq {self.first_seq}.."
                f"{self.last_seq}), applied {self.overrides_applied} overrides, touched "
                f"{self.facts_touched} facts, not used by a rule: {skips or 'none'}, "
                f"conflicts {len(self.conflicts)}, took {self.duration_s * 1000:.1f} ms"
                f"{frozen}{upgrade}")

    def outcome(self) -> str:
        """What happened, worded for the mode that was asked for and what came of it."""
        if self.dry_run:
            return ("dry run, nothing written: nothing new to consolidate"
                    if self.nothing_new else "dry run, nothing written")
        if self.applied:
            return "applied"
        return "nothing new to consolidate, nothing written"

    @property
    def nothing_new(self) -> bool:
        return self.events_read == 0 and self.overrides_applied == 0


@dataclass
class PassInputs:
    """Everything a pass reads, from one snapshot of the store."""

    checkpoint: Checkpoint
    until: int  # overrides up to here are applied by this pass
    plan: OverridePlan
    new_overrides: int
    reset_pending: bool  # a reset no pass applied yet: start from empty states
    after_seq: int  # results after_seq < seq <= until_seq are folded
    until_seq: int
    rules: dict[str, Rule]  # the pass's rules by kind
    # The config the pass renders with: the store's rule version (rules_of_store).
    config: RulesConfig = field(default_factory=RulesConfig)
    partials: Partials = field(default_factory=Partials)
    events_read: int = 0
    first_seq: int = 0
    last_stamp_ns: int = 0
    stored_states: dict[GroupId, dict[str, Any]] = field(default_factory=dict)
    existing: dict[GroupId, FactRow] = field(default_factory=dict)
    # The tier digest the pass builds on, and the hashes of the stored states it rewrites.
    digest_before: TierDigest = field(default_factory=TierDigest)
    replaced_states_sum: int = 0

    @property
    def nothing_new(self) -> bool:
        return self.events_read == 0 and self.new_overrides == 0


@dataclass
class PassResult:
    """What a pass computed: the states and facts to write and the events to log."""

    states: list[tuple[str, str, str, bool]]  # kind, key, state_json, already stored
    changes: list[FactChange]
    conflicts: list[dict[str, Any]]
    faults: list[tuple[str, str, str]] = field(default_factory=list)  # kind, key, why


# -- 1. read --------------------------------------------------------------------------
def read_inputs(partition: Partition, config: RulesConfig,
                max_events: int | None = None, rules: Sequence[Rule] | None = None
                ) -> PassInputs:
    with partition.store.read() as conn:
        checkpoint = read_checkpoint(partition, conn)
        config, rules = rules_of_store(checkpoint.rule_version, config, rules)
        until = partition.head(conn)[0]
        if max_events is not None:
            until = min(until, checkpoint.done_seq + max_events)
        overrides = read_overrides(partition, conn, until)
        plan = plan_overrides(overrides)
        after, results_until = result_range(checkpoint.done_seq, plan, until)
        inputs = PassInputs(checkpoint, until, plan,
                            sum(1 for o in overrides if o.seq > checkpoint.override_seq),
                            plan.reset_seq > checkpoint.override_seq, after, results_until,
                            {rule.kind: rule for rule in rules}, config)
        added = aggregate(partition.result_aggregates(
            after, results_until, int(config.time_bucket_s * 1e9), conn,
            parameter_buckets=parameter_bucket_ns(rules, config),
            originals_after=plan.reset_seq), config, rules)
        inputs.partials, inputs.events_read = added.partials, added.events_read
        # Amendments count no attempt of their own: what became of each is counted.
        for disposition, n in partition.amendment_dispositions(after, results_until,
                                                               conn).items():
            inputs.partials.skip(f"amendment:{disposition}", n)
        inputs.first_seq, inputs.last_stamp_ns = added.first_seq, added.last_stamp_ns
        if inputs.nothing_new:
            return inputs
        ident = partition.identity_hash
        inputs.digest_before = digest_before(ident, checkpoint, inputs.reset_pending, conn)
        keys = plan.keys_changed_after(checkpoint.override_seq)
        for kind, groups in inputs.partials.groups.items():
            rule = inputs.rules[kind]
            stored = {}
            if not inputs.reset_pending:
                texts = partition.consolidation_states(kind, groups, conn)
                inputs.replaced_states_sum += stored_states_sum(ident, kind, texts)
                stored = _decoded(texts)
            # A rule whose one fact per group has the group's key: no need to ask.
            one_fact = type(rule).fact_keys is OneFactPerGroup.fact_keys
            for group, partial in groups.items():
                state = stored.get(group)
                if state is not None:
                    inputs.stored_states[(kind, group)] = state
                if one_fact:
                    keys.add((kind, group))
                    continue
                keys.update([(kind, key) for key in rule.fact_keys(group, partial)])
                if state is not None:
                    keys.update([(kind, key) for key in rule.fact_keys(group, state)])
        if not inputs.reset_pending:
            inputs.existing = {(f.kind, f.key): f for f in partition.facts_by_key(keys, conn)}
    return inputs


def _decoded(texts: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The stored states, decoded."""
    return {key: plain_json_loads(text) for key, text in texts.items()}


# -- 2. compute (no I/O) --------------------------------------------------------------
def merged_states(partials: Partials, stored: dict[GroupId, dict[str, Any]],
                  config: RulesConfig, rules: dict[str, Rule]) -> dict[GroupId, dict[str, Any]]:
    """stored + partial, per touched group (the stored dicts are merged into in place)."""
    states = {}
    for kind, groups in partials.groups.items():
        rule = rules[kind]
        for group, partial in groups.items():
            state = stored.get((kind, group), {})
            rule.merge(state, partial, config)
            states[(kind, group)] = state
    return states


def render_all(states: dict[GroupId, dict[str, Any]], config: RulesConfig,
               rules: dict[str, Rule]) -> dict[GroupId, RenderedFact]:
    return {(f.kind, f.key): f for gid in sorted(states)
            for f in rules[gid[0]].render(gid[1], states[gid], config)}


def compute(inputs: PassInputs, config: RulesConfig) -> PassResult:
    """Merge, render and diff, one group at a time: a group's state is serialised and its
    facts diffed as soon as it is rendered, and its dicts let go, so a pass over 10^4
    keys holds JSON text, not 10^4 merged states and rendered values."""
    plan, existing = inputs.plan, inputs.existing
    changes: dict[GroupId, FactChange | None] = {}
    faults: list[tuple[str, str, str]] = []
    rows = []
    for kind in sorted(inputs.partials.groups):
        rule, groups = inputs.rules[kind], inputs.partials.groups[kind]
        for group in sorted(groups):
            stored = (kind, group) in inputs.stored_states
            state = inputs.stored_states.pop((kind, group), {})
            rule.merge(state, groups.pop(group), config)
            try:
                rendered = rule.render(group, state, config)
            except Exception as exc:  # the group's facts wait; its evidence is kept
                faults.append((kind, group, _why(exc)))
                rendered = ()
            for fact in rendered:
                key = (fact.kind, fact.key)
                try:
                    changes[key] = fact_change(key, plan.finalize(key, fact),
                                               existing.get(key))
                except Exception as exc:  # this fact alone is left as it was
                    faults.append((*key, _why(exc)))
            rows.append((kind, group, plain_canonical_json(state), stored))
    for key in plan.keys_changed_after(inputs.checkpoint.override_seq) - changes.keys():
        try:
            evidence = fact_as_rendered(existing[key]) if key in existing else None
            changes[key] = fact_change(key, plan.finalize(key, evidence), existing.get(key))
        except Exception as exc:  # a stored row that does not parse: left as it was
            faults.append((*key, _why(exc)))
    ordered = [changes[key] for key in sorted(changes) if changes[key] is not None]
    return PassResult(rows, ordered, [c for c in map(conflict_event, ordered) if c], faults)


def _why(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def run_payload(report: PassReport, inputs: PassInputs, digest: TierDigest) -> dict[str, Any]:
    """The consolidation_run event: the range processed, facts touched, skips (the
    next pass's checkpoint), and the digest of the tier the pass leaves."""
    return {"rule_version": inputs.config.rule_version, RUN_DIGEST_KEY: digest.payload(),
            "first_seq": report.first_seq, "last_seq": report.last_seq,
            "events_read": report.events_read, "facts_touched": report.facts_touched,
            "skipped": dict(sorted(report.skipped.items())),
            "touched_facts": sorted(f"{c.kind}|{c.key}" for c in report.changes),
            "override_seq": inputs.until, "frozen": report.frozen,
            "reset": inputs.reset_pending}


# -- the pass -------------------------------------------------------------------------
@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the duration. A pass allocates tens of
    thousands of acyclic dicts and lists (freed by reference counting as usual), which
    would otherwise trigger collections that walk the whole heap: a tenth of an
    incremental pass's time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def consolidation_pass(partition: Partition, config: RulesConfig = RulesConfig(), *,
                       apply: bool = True, stamp_ns: int | None = None,
                       max_events: int | None = None,
                       rules: Sequence[Rule] | None = None) -> PassReport:
    """Run one pass; with apply=False only report what it would change (dry run).
    `rules` are the rule set of the store's version (rules_of_store: the configured
    config.rule_version on a new store) unless a caller brings its own (a rule being
    tried out)."""
    with collector_paused():
        return _run_pass(partition, config, apply, stamp_ns, max_events, rules)


def _run_pass(partition: Partition, config: RulesConfig, apply: bool, stamp_ns: int | None,
              max_events: int | None, rules: Sequence[Rule] | None) -> PassReport:
    started = time.perf_counter()
    inputs, report, result = plan_pass(partition, config, apply, max_events, rules)
    if apply and result is not None:
        report.run_event_id = commit(partition, inputs, report, result, stamp_ns)
        report.applied = True
    report.duration_s = time.perf_counter() - started
    return report


def plan_pass(partition: Partition, config: RulesConfig, apply: bool = True,
              max_events: int | None = None, rules: Sequence[Rule] | None = None
              ) -> tuple[PassInputs, PassReport, PassResult | None]:
    """Steps 1 and 2: read the inputs and compute the result (None: nothing new), with the
    report of the pass they make; nothing is written."""
    inputs = read_inputs(partition, config, max_events, rules)
    used = inputs.config.rule_version
    report = PassReport(partition.identity_hash, rule_version=used,
                        upgrade_available=_newer(config.rule_version, used),
                        dry_run=not apply,
                        previous_run_event_id=inputs.checkpoint.run_event_id,
                        frozen=inputs.plan.frozen_since is not None,
                        first_seq=inputs.first_seq, events_read=inputs.events_read,
                        skipped=dict(inputs.partials.skipped),
                        overrides_applied=inputs.new_overrides,
                        ill_shaped=list(inputs.plan.ill_shaped))
    if inputs.nothing_new:
        report.last_seq = inputs.checkpoint.done_seq
        return inputs, report, None
    report.last_seq = inputs.until_seq
    result = compute(inputs, inputs.config)
    report.changes, report.conflicts = result.changes, result.conflicts
    report.fact_faults = result.faults
    report.facts_touched = len(result.changes)
    return inputs, report, result


def _newer(configured: str, used: str) -> str | None:
    """The configured rule version when it is newer than the store's."""
    return configured if RULE_VERSIONS.index(configured) > RULE_VERSIONS.index(used) else None


# -- 3. commit --------------------------------------------------------------------------
def commit(partition: Partition, inputs: PassInputs, report: PassReport, result: PassResult,
           stamp_ns: int | None = None) -> int:
    """Write what compute() made of these inputs, in one transaction; the run event's id."""
    stamp = stamp_ns if stamp_ns is not None else inputs.last_stamp_ns
    # JSON values only (str keys): what decoding their canonical JSON gives back.
    audit = [NewEvent(c["event_kind"], {k: v for k, v in c.items() if k != "event_kind"},
                      stamp, as_decoded=True) for c in result.conflicts]
    digest = digest_after(partition.identity_hash, inputs.digest_before,
                          inputs.replaced_states_sum, result.states, result.changes)
    audit.append(NewEvent(CONSOLIDATION_RUN, run_payload(report, inputs, digest), stamp,
                          as_decoded=True))
    facts = [fact_write(c) for c in result.changes]
    written = partition.commit_pass(inputs.checkpoint.run_seq, inputs.reset_pending,
                                    result.states, facts, audit)
    return written[-1].id


# -- snapshots --------------------------------------------------------------------------
def snapshot_entry(kind, key, status, confidence, n, rule_version, updated_ns, value):
    return {"kind": kind, "key": key, "status": status, "confidence": confidence,
            "n_observations": n, "rule_version": rule_version, "last_updated_ns": updated_ns,
            "value": value}


def facts_snapshot(partition: Partition) -> str:
    """Canonical JSON of an identity's knowledge: what must be byte-equal across replays.

    Row ids and supporting event ids depend on insertion order, so they are provenance,
    not part of the snapshot.
    """
    return canonical_json([snapshot_entry(f.kind, f.key, f.status, f.confidence,
                                          f.n_observations, f.rule_version, f.last_updated_ns,
                                          f.value) for f in partition.facts()])


def replay_snapshot(partition: Partition, config: RulesConfig = RulesConfig(), *,
                    until_seq: int | None = None, until_stamp_ns: int | None = None,
                    rules: Sequence[Rule] | None = None) -> str:
    """The facts as they were at a point of the log, rebuilt from the events alone in
    memory (the live store is not touched), overrides applied as the passes apply
    them, with the rules of the store's version (rules_of_store). Same format as
    facts_snapshot."""
    with partition.store.read() as conn:
        config, rules = rules_of_store(read_checkpoint(partition, conn).rule_version,
                                       config, rules)
        last = until_seq if until_seq is not None else partition.head(conn)[0]
        plan = plan_overrides(read_overrides(partition, conn, last, until_stamp_ns))
        after, results_until = result_range(0, plan, last)
        partials = aggregate(partition.result_aggregates(
            after, results_until, int(config.time_bucket_s * 1e9), conn,
            until_stamp_ns=until_stamp_ns,
            parameter_buckets=parameter_bucket_ns(rules, config),
            originals_after=plan.reset_seq), config, rules).partials
    by_kind = {rule.kind: rule for rule in rules}
    rendered = render_all(merged_states(partials, {}, config, by_kind), config, by_kind)
    keys = sorted(set(rendered) | set(plan.operator_facts))
    facts = [f for f in (plan.finalize(key, rendered.get(key)) for key in keys) if f]
    return canonical_json([snapshot_entry(f.kind, f.key, f.status, f.confidence,
                                          f.n_observations, f.rule_version, f.last_updated_ns,
                                          f.value) for f in facts])

"""The semantic tier as the newest consolidation run left it, rebuilt without the stored
rows: the states from the log, the facts from states. What `robot-memory verify` holds
the stored rows to, row by row (robot_memory/consolidation/tier_audit.py).

Both follow from the determinism of the pass ("Deterministic consolidation" in
docs/architecture.md):
- a group's state is the merge of the results the passes folded into it, whatever the
  cut into passes: the results after the last reset up to the run's `last_seq`;
- a fact is its group's state rendered, with the overrides the run had applied
  (up to its `override_seq`), or an operator's fact.
Rows are given as the store keeps them: a state as its canonical JSON, a fact as its
columns after its kind and key (FACT_COLUMNS).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from robot_memory.canonical import plain_canonical_json
from robot_memory.consolidation.checkpoint import Checkpoint, read_checkpoint, read_overrides
from robot_memory.consolidation.override_plan import OverridePlan, plan_overrides
from robot_memory.consolidation.partials import aggregate
from robot_memory.consolidation.rules import (RULES, Rule, RulesConfig, parameter_bucket_ns,
                                              rules_of_store)
from robot_memory.store import Partition

Key = tuple[str, str]  # (fact kind, key)
# A fact's stored columns after its kind and key, in this order.
FACT_COLUMNS = ("fact_value_json", "status", "confidence", "n_observations", "rule_version",
                "last_supporting_event_id", "last_updated_ns")


def checkpoint_and_plan(partition: Partition, conn: Connection
                        ) -> tuple[Checkpoint, OverridePlan]:
    """The newest run and the overrides as it had applied them."""
    checkpoint = read_checkpoint(partition, conn)
    return checkpoint, plan_overrides(read_overrides(partition, conn, checkpoint.override_seq))


def states_from_log(partition: Partition, config: RulesConfig, conn: Connection,
                    rules: Sequence[Rule] | None = None) -> dict[Key, dict[str, Any]]:
    """Every group's state as the newest run left it, merged from the log's results (the
    live chain must hold them all: history a compaction removed is not read), with the
    rules of the store's version unless `rules` are given."""
    checkpoint, plan = checkpoint_and_plan(partition, conn)
    config, rules = rules_of_store(checkpoint.rule_version, config, rules)
    after = plan.reset_seq
    until = max(after, checkpoint.done_seq)
    partials = aggregate(partition.result_aggregates(
        after, until, int(config.time_bucket_s * 1e9), conn,
        parameter_buckets=parameter_bucket_ns(rules, config),
        originals_after=after), config, rules).partials
    by_kind = {rule.kind: rule for rule in rules}
    states = {}
    for kind, groups in partials.groups.items():
        for group, partial in groups.items():
            state: dict[str, Any] = {}
            by_kind[kind].merge(state, partial, config)
            states[(kind, group)] = state
    return states


def state_texts(states: dict[Key, dict[str, Any]]) -> dict[Key, str]:
    """The states as stored: canonical JSON."""
    return {key: plain_canonical_json(state) for key, state in states.items()}


def facts_from_states(states: dict[Key, dict[str, Any]], plan: OverridePlan,
                      config: RulesConfig, rules: Sequence[Rule] = RULES
                      ) -> dict[Key, tuple]:
    """The facts these states render to, overrides applied, as stored columns. A state
    of a kind these rules do not know, or one a pass could not have written (a damaged
    row: the rule cannot read it), renders nothing."""
    by_kind = {rule.kind: rule for rule in rules}
    rendered = {}
    for kind, group in sorted(states):
        rule = by_kind.get(kind)
        if rule is None:
            continue
        try:
            facts = rule.render(group, states[(kind, group)], config)
        except (LookupError, TypeError, ValueError, AttributeError, ArithmeticError):
            continue
        for fact in facts:
            rendered[(fact.kind, fact.key)] = fact
    facts = {}
    for key in sorted(set(rendered) | set(plan.operator_facts)):
        fact = plan.finalize(key, rendered.get(key))
        if fact is not None:
            facts[key] = (plain_canonical_json(fact.value), fact.status, fact.confidence,
                          fact.n_observations, fact.rule_version,
                          fact.last_supporting_event_id, fact.last_updated_ns)
    return facts

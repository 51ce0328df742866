"""The pure half of human overrides: what the override events up to a point of the log
mean for consolidation (no I/O; the events are read by consolidation/checkpoint.py and
recorded by override_records.py). See overrides.py for the actions."""

from __future__ import annotations

from dataclasses import dataclass, field

from robot_memory.consolidation.rules import STATUS_ACTIVE, STATUS_INVALIDATED
from robot_memory.consolidation.rules.base import RenderedFact
from robot_memory.store import FactRow, StoredEvent

OPERATOR_FACT, INVALIDATE, FREEZE, UNFREEZE, RESET_SEMANTIC = (
    "operator_fact", "invalidate", "freeze", "unfreeze", "reset_semantic")
ACTIONS = (OPERATOR_FACT, INVALIDATE, FREEZE, UNFREEZE, RESET_SEMANTIC)
OPERATOR_RULE_VERSION = "operator/1"


@dataclass
class OverridePlan:
    """What the overrides up to a point of the log mean for consolidation."""

    reset_seq: int = 0  # results at or before the last reset are never folded again
    frozen_since: int | None = None  # seq of the freeze in force, if frozen
    operator_facts: dict[tuple[str, str], RenderedFact] = field(default_factory=dict)
    invalidated: set[tuple[str, str]] = field(default_factory=set)
    keys_after: dict[int, set[tuple[str, str]]] = field(default_factory=dict)

    def keys_changed_after(self, seq: int) -> set[tuple[str, str]]:
        """Fact keys named by overrides logged after `seq` (since the last reset)."""
        return {key for at, keys in self.keys_after.items() if at > seq for key in keys}

    def finalize(self, key: tuple[str, str], evidence: RenderedFact | None
                 ) -> RenderedFact | None:
        """The fact for this key once overrides are applied to what evidence says."""
        fact = self.operator_facts.get(key, evidence)
        if fact is not None and key in self.invalidated:
            fact = RenderedFact(fact.kind, fact.key, fact.value, STATUS_INVALIDATED,
                                fact.confidence, fact.n_observations,
                                fact.last_supporting_event_id, fact.last_updated_ns,
                                None, fact.rule_version)
        return fact


def plan_overrides(overrides: list[StoredEvent]) -> OverridePlan:
    """Fold override events (in log order) into a plan; a reset clears what came before."""
    plan = OverridePlan()
    for event in overrides:
        action, payload = event.payload["action"], event.payload
        if action == RESET_SEMANTIC:
            frozen = plan.frozen_since
            plan = OverridePlan(reset_seq=event.seq, frozen_since=frozen)
        elif action == FREEZE:
            plan.frozen_since = plan.frozen_since or event.seq
        elif action == UNFREEZE:
            plan.frozen_since = None
        elif action in (OPERATOR_FACT, INVALIDATE):
            key = (payload["fact_kind"], payload["fact_key"])
            plan.keys_after.setdefault(event.seq, set()).add(key)
            if action == OPERATOR_FACT:
                plan.operator_facts[key] = operator_fact(event)
                plan.invalidated.discard(key)
            else:
                plan.invalidated.add(key)
    return plan


def operator_fact(event: StoredEvent) -> RenderedFact:
    payload = event.payload
    value = {**payload["value"], "source": "operator", "operator": payload["operator"],
             "reason": payload["reason"]}
    return RenderedFact(payload["fact_kind"], payload["fact_key"], value, STATUS_ACTIVE,
                        float(payload["confidence"]), 0, event.id, event.stamp_ns, None,
                        OPERATOR_RULE_VERSION)


def fact_as_rendered(row: FactRow) -> RenderedFact:
    return RenderedFact(row.kind, row.key, row.value, row.status, row.confidence,
                        row.n_observations, row.last_supporting_event_id, row.last_updated_ns,
                        None, row.rule_version)

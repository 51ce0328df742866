"""The pure half of human overrides: what the override events up to a point of the log
mean for consolidation (no I/O; the events are read by consolidation/checkpoint.py and
recorded by override_records.py). See overrides.py for the actions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from robot_memory.consolidation.fact_schemas import ValueProblem, operator_fact_problem
from robot_memory.consolidation.rules import STATUS_ACTIVE, STATUS_INVALIDATED
from robot_memory.consolidation.rules.base import RenderedFact
from robot_memory.store import FactRow, StoredEvent

OPERATOR_FACT, INVALIDATE, FREEZE, UNFREEZE, RESET_SEMANTIC = (
    "operator_fact", "invalidate", "freeze", "unfreeze", "reset_semantic")
ACTIONS = (OPERATOR_FACT, INVALIDATE, FREEZE, UNFREEZE, RESET_SEMANTIC)
OPERATOR_RULE_VERSION = "operator/1"


class IllShaped(NamedTuple):
    """An override in the log that cannot be applied (written by an older version, or by
    hand): skipped by every pass and replay, and named so an operator can retract it."""

    event_id: int
    seq: int
    kind: str
    key: str
    problem: ValueProblem

    def describe(self) -> str:
        return (f"override event {self.event_id} (seq {self.seq}): {self.kind} "
                f"[{self.key}]: {self.problem}")


def _text(payload: Any, name: str) -> str:
    """A payload's field as text to name it by, whatever it holds."""
    value = payload.get(name, "") if isinstance(payload, dict) else ""
    return value if isinstance(value, str) else repr(value)


@dataclass
class OverridePlan:
    """What the overrides up to a point of the log mean for consolidation."""

    reset_seq: int = 0  # results at or before the last reset are never folded again
    frozen_since: int | None = None  # seq of the freeze in force, if frozen
    operator_facts: dict[tuple[str, str], RenderedFact] = field(default_factory=dict)
    invalidated: set[tuple[str, str]] = field(default_factory=set)
    keys_after: dict[int, set[tuple[str, str]]] = field(default_factory=dict)
    # Overrides skipped, in log order, that no later override of their key (nor a
    # reset) has retracted: what a node warns about.
    ill_shaped: list[IllShaped] = field(default_factory=list)

    def keys_changed_after(self, seq: int) -> set[tuple[str, str]]:
        """Fact keys named by overrides logged after `seq` (since the last reset)."""
        return {key for at, keys in self.keys_after.items() if at > seq for key in keys}

    def finalize(self, key: tuple[str, str], evidence: RenderedFact | None
                 ) -> RenderedFact | None:
        """The fact for this key once overrides are applied to what evidence says."""
        fact = self.operator_facts.get(key, evidence)
        if fact is not None and key in self.invalidated:
            fact = fact._replace(status=STATUS_INVALIDATED, conflict=None)
        return fact


def plan_overrides(overrides: list[StoredEvent]) -> OverridePlan:
    """Fold override events (in log order) into a plan; a reset clears what came before."""
    plan = OverridePlan()
    for event in overrides:
        payload = event.payload
        action = payload.get("action") if isinstance(payload, dict) else None
        problem = _problem(action, payload)
        if problem is not None:
            plan.ill_shaped.append(IllShaped(event.id, event.seq, _text(payload, "fact_kind"),
                                             _text(payload, "fact_key"), problem))
            continue
        if action == RESET_SEMANTIC:  # what came before it is void, skipped ones too
            frozen = plan.frozen_since
            plan = OverridePlan(reset_seq=event.seq, frozen_since=frozen)
        elif action == FREEZE:
            plan.frozen_since = plan.frozen_since or event.seq
        elif action == UNFREEZE:
            plan.frozen_since = None
        elif action in (OPERATOR_FACT, INVALIDATE):
            key = (payload["fact_kind"], payload["fact_key"])
            plan.keys_after.setdefault(event.seq, set()).add(key)
            if plan.ill_shaped:  # an override of the key retracts skipped ones before it
                plan.ill_shaped = [s for s in plan.ill_shaped if (s.kind, s.key) != key]
            if action == OPERATOR_FACT:
                plan.operator_facts[key] = operator_fact(event)
                plan.invalidated.discard(key)
            else:
                plan.invalidated.add(key)
    return plan


def _problem(action: Any, payload: Any) -> ValueProblem | None:
    """Why an override cannot be applied (an operator fact not of its kind's shape, an
    invalidation naming no fact), or None."""
    if action == OPERATOR_FACT:
        return operator_fact_problem(payload)
    if action == INVALIDATE:
        for name in ("fact_kind", "fact_key"):
            if not isinstance(payload.get(name), str):
                return ValueProblem(name, "a string is required")
    return None


def operator_fact(event: StoredEvent) -> RenderedFact:
    payload = event.payload
    value = {**payload["value"], "source": "operator", "operator": payload["operator"],
             "reason": payload["reason"]}
    return RenderedFact(kind=payload["fact_kind"], key=payload["fact_key"], value=value,
                        status=STATUS_ACTIVE, confidence=float(payload["confidence"]),
                        n_observations=0, last_supporting_event_id=event.id,
                        last_updated_ns=event.stamp_ns, rule_version=OPERATOR_RULE_VERSION)


def fact_as_rendered(row: FactRow) -> RenderedFact:
    return RenderedFact.of_row(row)

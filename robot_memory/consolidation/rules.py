"""Consolidation rules v1: how execution results become facts.

Each rule groups records by a stable key, folds them into a mergeable JSON state
(counts and multisets only, so folding is commutative and associative), and renders
that state as a fact. The rule version is stamped on every fact and every run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from robot_memory.consolidation.stats import (band, most_common, multiset_add, rate_confidence,
                                              shrunk_rate)
from robot_memory.records import ExecutionRecord

RULE_VERSION = "v1.0"

STATUS_CANDIDATE = "candidate"
STATUS_ACTIVE = "active"
STATUS_CONTESTED = "contested"
STATUS_INVALIDATED = "invalidated"


@dataclass(frozen=True)
class RulesConfig:
    """Knobs of rules v1 (the consolidator node's parameters of the same names)."""

    # A fact stays a candidate (not served as authoritative) below this many observations.
    promotion_min_observations: int = 3
    # Beta prior for the shrunk success rate (seed 000: mean 0.5, weight 10).
    prior_mean: float = 0.5
    prior_weight: float = 10.0


@dataclass(frozen=True)
class RenderedFact:
    kind: str
    key: str
    value: dict[str, Any]
    status: str
    confidence: float
    n_observations: int
    last_supporting_event_id: int
    last_updated_ns: int


class SkipRecord(Exception):
    """Raised by a rule when a record lacks the structured fields the rule needs."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def fact_key(*parts: str) -> str:
    """Stable, human-readable key, e.g. 'manipulation.grasp + glass_cup + sim_relaxed'."""
    return " + ".join(part if part else "-" for part in parts)


def note_support(state: dict[str, Any], event_id: int, stamp_ns: int) -> None:
    state["last_event_id"] = max(state.get("last_event_id", 0), event_id)
    state["last_stamp_ns"] = max(state.get("last_stamp_ns", 0), stamp_ns)


def promoted_status(n: int, config: RulesConfig) -> str:
    return STATUS_ACTIVE if n >= config.promotion_min_observations else STATUS_CANDIDATE


class SkillSuccessRate:
    """How often a skill succeeds on a target in an environment, and with what parameters."""

    kind = "skill_success_rate"

    def group(self, record: ExecutionRecord) -> str:
        return fact_key(record.skill_id, record.target_class, record.environment)

    def add(self, state: dict[str, Any], record: ExecutionRecord, event_id: int,
            stamp_ns: int) -> None:
        if not state:
            state.update(skill_id=record.skill_id, target_class=record.target_class,
                         environment=record.environment, n=0, successes=0,
                         success_parameters={}, failure_reasons={})
        state["n"] += 1
        if record.success:
            state["successes"] += 1
            for name, value in record.parameters.items():
                multiset_add(state["success_parameters"].setdefault(name, {}), value)
        else:
            reason = record.failure_reason or "unspecified"
            state["failure_reasons"][reason] = state["failure_reasons"].get(reason, 0) + 1
        note_support(state, event_id, stamp_ns)

    def render(self, group: str, state: dict[str, Any], config: RulesConfig) -> list[RenderedFact]:
        n, successes = state["n"], state["successes"]
        confidence = rate_confidence(successes, n)
        recommended = {name: {**band(bag), "n": sum(bag.values())}
                       for name, bag in sorted(state["success_parameters"].items())}
        value = {
            "skill_id": state["skill_id"], "target_class": state["target_class"],
            "environment": state["environment"], "n": n, "successes": successes,
            "failures": n - successes, "rate": successes / n,
            "shrunk_rate": shrunk_rate(successes, n, config.prior_mean, config.prior_weight),
            "confidence": confidence, "recommended_parameters": recommended,
            "failure_reasons": dict(sorted(state["failure_reasons"].items())),
            "most_common_failure": most_common(state["failure_reasons"]),
            "rule_version": RULE_VERSION,
        }
        return [RenderedFact(self.kind, group, value, promoted_status(n, config), confidence, n,
                             state["last_event_id"], state["last_stamp_ns"])]


RULES = (SkillSuccessRate(),)
FACT_KINDS = tuple(rule.kind for rule in RULES)

"""object_property: what the robot measured about a class of object (key: target_class
+ property): n, exact mean, and a robust band (median, IQR)."""

from __future__ import annotations

from typing import Any

from robot_memory.consolidation.rules.base import (OneFactPerGroup, Partials,
                                                   RenderedFact, RulesConfig, fact_key,
                                                   max_support, promoted_status, r6)
from robot_memory.consolidation.stats import band, exact_mean, multiset_merge
from robot_memory.store import OutcomeRow, ValueBatch

# How many observations make half the confidence (before spread is accounted for).
HALF_CONFIDENCE_N = 3


def property_confidence(n: int, spread: dict[str, float]) -> float:
    """n/(n+3) shrunk by relative spread: 1 / (1 + IQR / |median|)."""
    scale = abs(spread["median"]) or 1.0
    relative_iqr = (spread["q3"] - spread["q1"]) / scale
    return r6(n / (n + HALF_CONFIDENCE_N) / (1.0 + relative_iqr))


class ObjectProperty(OneFactPerGroup):
    kind = "object_property"
    parameter_buckets = False  # reads no parameters

    def add_outcome(self, row: OutcomeRow, config: RulesConfig, into: Partials) -> None:
        if row.invalid_reason is not None:
            return
        if not row.target_class:
            into.skip(f"{self.kind}:no_target_class", row.count)
        elif not row.has_observations:
            into.skip(f"{self.kind}:no_observations", row.count)

    def add_values(self, aggregates: ValueBatch, config: RulesConfig, into: Partials) -> None:
        groups = into.groups.setdefault(self.kind, {})
        for target, name, value, count, max_id, max_stamp in aggregates.observations:
            key = fact_key(target, name)
            part = groups.get(key)
            if part is None:
                part = groups[key] = {"target_class": target, "property": name, "values": {},
                                      "last_event_id": 0, "last_stamp_ns": 0}
            part["values"][value] = part["values"].get(value, 0) + count
            if max_id > part["last_event_id"]:
                part["last_event_id"] = max_id
            if max_stamp > part["last_stamp_ns"]:
                part["last_stamp_ns"] = max_stamp

    def merge(self, state: dict[str, Any], partial: dict[str, Any],
              config: RulesConfig) -> None:
        if not state:
            state.update(target_class=partial["target_class"], property=partial["property"],
                         values={})
        multiset_merge(state["values"], partial["values"])
        max_support(state, partial)

    def render(self, key: str, state: dict[str, Any], config: RulesConfig) -> list[RenderedFact]:
        n = sum(state["values"].values())
        spread = band(state["values"])
        confidence = property_confidence(n, spread)
        value = {"target_class": state["target_class"], "property": state["property"], "n": n,
                 "mean": exact_mean(state["values"]), "band": spread,
                 "confidence": confidence, "rule_version": config.rule_version}
        return [RenderedFact(kind=self.kind, key=key, value=value,
                             status=promoted_status(n, config), confidence=confidence,
                             n_observations=n, last_supporting_event_id=state["last_event_id"],
                             last_updated_ns=state["last_stamp_ns"],
                             rule_version=config.rule_version)]

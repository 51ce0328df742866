"""object_property: what the robot measured about a class of object (key: target_class
+ property): n, exact mean, and a robust band (median, IQR)."""

from __future__ import annotations

from typing import Any

from robot_memory.consolidation.rules.base import (RULE_VERSION, RenderedFact, RulesConfig,
                                                   SkipRecord, fact_key, note_support,
                                                   promoted_status, r6)
from robot_memory.consolidation.stats import band, exact_mean, multiset_add
from robot_memory.records import ExecutionRecord

# How many observations make half the confidence (before spread is accounted for).
HALF_CONFIDENCE_N = 3


def property_confidence(n: int, spread: dict[str, float]) -> float:
    """n/(n+3) shrunk by relative spread: 1 / (1 + IQR / |median|)."""
    scale = abs(spread["median"]) or 1.0
    relative_iqr = (spread["q3"] - spread["q1"]) / scale
    return r6(n / (n + HALF_CONFIDENCE_N) / (1.0 + relative_iqr))


class ObjectProperty:
    kind = "object_property"

    def extract(self, record: ExecutionRecord) -> list[tuple[str, tuple]]:
        if not record.target_class:
            raise SkipRecord("no_target_class")
        if not record.observations:
            raise SkipRecord("no_observations")
        return [(fact_key(record.target_class, name),
                 (record.target_class, name, value, record.stamp_ns))
                for name, value in sorted(record.observations.items())]

    def fold(self, state: dict[str, Any], item: tuple, event_id: int,
             config: RulesConfig) -> None:
        target_class, name, value, stamp_ns = item
        if not state:
            state.update(target_class=target_class, property=name, values={})
        multiset_add(state["values"], value)
        note_support(state, event_id, stamp_ns)

    def render(self, key: str, state: dict[str, Any], config: RulesConfig) -> list[RenderedFact]:
        n = sum(state["values"].values())
        spread = band(state["values"])
        confidence = property_confidence(n, spread)
        value = {"target_class": state["target_class"], "property": state["property"], "n": n,
                 "mean": exact_mean(state["values"]), "band": spread,
                 "confidence": confidence, "rule_version": RULE_VERSION}
        return [RenderedFact(self.kind, key, value, promoted_status(n, config), confidence, n,
                             state["last_event_id"], state["last_stamp_ns"])]

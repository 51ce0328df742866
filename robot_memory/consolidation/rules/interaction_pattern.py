"""interaction_pattern: how a skill fails on a target (key: skill_id + target_class +
failure_reason): count, share of that skill-target's failures, and the parameter band
of the failing attempts (e.g. slips happen at 5-15 N)."""

from __future__ import annotations

from typing import Any

from robot_memory.consolidation.rules.base import (Partials, RenderedFact,
                                                   RulesConfig, fact_key, max_support,
                                                   promoted_status, r6)
from robot_memory.consolidation.rules.outcomes import add_counts, merge_timeline
from robot_memory.consolidation.rules.timeline import decayed_totals
from robot_memory.consolidation.stats import band_with_n, merge_named_bag, wilson_confidence
from robot_memory.store import OutcomeRow, ValueBatch


class InteractionPattern:
    kind = "interaction_pattern"
    parameter_buckets = False  # reads ValueBatch.parameters (not per bucket)

    def fact_keys(self, group: str, state: dict[str, Any]) -> list[str]:
        return [fact_key(state["skill_id"], state["target_class"], reason)
                for reason in sorted(state["reasons"])]

    def add_outcome(self, row: OutcomeRow, config: RulesConfig, into: Partials) -> None:
        groups = into.groups.setdefault(self.kind, {})
        if row.invalid_reason is not None or row.success:
            return
        skill, target, reason, count = (row.skill_id, row.target_class, row.failure_reason,
                                        row.count)
        max_id, max_stamp = row.max_event_id, row.max_stamp_ns
        key = fact_key(skill, target)
        part = groups.get(key)
        if part is None:
            part = groups[key] = {"skill_id": skill, "target_class": target,
                                  "failures": 0, "reasons": {}}
        entry = part["reasons"].get(reason or "unspecified")
        if entry is None:
            entry = part["reasons"][reason or "unspecified"] = {
                "count": 0, "parameters": {}, "buckets": {}, "last_event_id": 0,
                "last_stamp_ns": 0}
        part["failures"] += count
        entry["count"] += count
        add_counts(entry, row.bucket, 0, count)
        if max_id > entry["last_event_id"]:
            entry["last_event_id"] = max_id
        if max_stamp > entry["last_stamp_ns"]:
            entry["last_stamp_ns"] = max_stamp

    def add_values(self, aggregates: ValueBatch, config: RulesConfig, into: Partials) -> None:
        groups = into.groups.setdefault(self.kind, {})
        for (skill, target, _env, success, reason, name, value,
             count) in aggregates.parameters:
            if not success:
                entry = groups[fact_key(skill, target)]["reasons"][reason or "unspecified"]
                bag = entry["parameters"].setdefault(name, {})
                bag[value] = bag.get(value, 0) + count

    def merge(self, state: dict[str, Any], partial: dict[str, Any],
              config: RulesConfig) -> None:
        if not state:
            state.update(skill_id=partial["skill_id"], target_class=partial["target_class"],
                         failures=0, reasons={})
        state["failures"] += partial["failures"]
        for reason, part in partial["reasons"].items():
            entry = state["reasons"].setdefault(reason, {"count": 0, "parameters": {},
                                                         "last_event_id": 0,
                                                         "last_stamp_ns": 0})
            entry["count"] += part["count"]
            for name, bag in part["parameters"].items():
                merge_named_bag(entry["parameters"], name, bag)
            merge_timeline(entry, part, 1, config)
            max_support(entry, part)

    def render(self, group: str, state: dict[str, Any], config: RulesConfig) -> list[RenderedFact]:
        facts = []
        for reason, entry in sorted(state["reasons"].items()):
            safety = reason in config.safety_failure_reasons
            half_life = config.safety_half_life_s if safety else config.half_life_s
            count = entry["count"]
            confidence = wilson_confidence(count, state["failures"])
            value = {
                "skill_id": state["skill_id"], "target_class": state["target_class"],
                "failure_reason": reason, "count": count, "failures": state["failures"],
                "share_of_failures": r6(count / state["failures"]) if state["failures"]
                else 0.0,
                "weighted_count": r6(decayed_totals(entry, [half_life], config)[0]),
                "safety_relevant": safety,
                "failure_parameters": {name: band_with_n(bag)
                                       for name, bag in sorted(entry["parameters"].items())},
                "confidence": confidence, "rule_version": config.rule_version,
            }
            facts.append(RenderedFact(
                kind=self.kind, key=fact_key(state["skill_id"], state["target_class"], reason),
                value=value, status=promoted_status(count, config), confidence=confidence,
                n_observations=count, last_supporting_event_id=entry["last_event_id"],
                last_updated_ns=entry["last_stamp_ns"], rule_version=config.rule_version))
        return facts

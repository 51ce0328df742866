"""skill_success_rate: how often a skill succeeds on a target in an environment, and
with which parameters it succeeds (key: skill_id + target_class + environment)."""

from __future__ import annotations

from typing import Any

from robot_memory.consolidation.rules.base import (RULE_VERSION, STATUS_CONTESTED, OneFactPerGroup,
                                                   Partials, RenderedFact, RulesConfig, count_into,
                                                   fact_key, max_support, promoted_status)
from robot_memory.consolidation.rules.outcomes import (merge_outcomes, note_outcome_row,
                                                       rate_view)
from robot_memory.consolidation.stats import (band_with_n, merge_named_bag, most_common,
                                              shrunk_rate)
from robot_memory.store import OutcomeRow, ValueBatch


class SkillSuccessRate(OneFactPerGroup):
    kind = "skill_success_rate"
    parameter_buckets = False  # reads ValueBatch.parameters (not per bucket)

    def add_outcome(self, row: OutcomeRow, config: RulesConfig, into: Partials) -> None:
        groups = into.groups.setdefault(self.kind, {})
        if row.invalid_reason is not None:
            return
        skill, target, environment = row.skill_id, row.target_class, row.environment
        success, reason, count = row.success, row.failure_reason, row.count
        key = fact_key(skill, target, environment)
        part = groups.get(key)
        if part is None:
            part = groups[key] = {
                "skill_id": skill, "target_class": target, "environment": environment,
                "n": 0, "successes": 0, "success_parameters": {}, "failure_reasons": {},
                "buckets": {}, "last_event_id": 0, "last_stamp_ns": 0}
        part["n"] += count
        if success:
            part["successes"] += count
        else:
            count_into(part["failure_reasons"], reason or "unspecified", count)
        note_outcome_row(part, success, reason, row.bucket, count, row.max_event_id,
                         row.max_stamp_ns, config)

    def add_values(self, aggregates: ValueBatch, config: RulesConfig, into: Partials) -> None:
        groups = into.groups.setdefault(self.kind, {})
        for (skill, target, environment, success, _reason, name, value,
             count) in aggregates.parameters:
            if success:
                bags = groups[fact_key(skill, target, environment)]["success_parameters"]
                bag = bags.setdefault(name, {})
                bag[value] = bag.get(value, 0) + count

    def merge(self, state: dict[str, Any], partial: dict[str, Any],
              config: RulesConfig) -> None:
        merge_skill_counts(state, partial, config)
        max_support(state, partial)

    def render(self, key: str, state: dict[str, Any], config: RulesConfig) -> list[RenderedFact]:
        n, successes = state["n"], state["successes"]
        weighted, confidence, conflict = rate_view(state, config)
        value = {
            "skill_id": state["skill_id"], "target_class": state["target_class"],
            "environment": state["environment"], "n": n, "successes": successes,
            "failures": n - successes, "rate": successes / n,
            "weighted": weighted,
            "shrunk_rate": shrunk_rate(weighted["successes"], weighted["n"], config.prior_mean,
                                       config.prior_weight),
            "confidence": confidence,
            "recommended_parameters": {
                name: band_with_n(bag)
                for name, bag in sorted(state["success_parameters"].items())},
            "failure_reasons": dict(sorted(state["failure_reasons"].items())),
            "most_common_failure": most_common(state["failure_reasons"]),
            "contradiction_test": conflict,
            "rule_version": RULE_VERSION,
        }
        status = STATUS_CONTESTED if conflict["contested"] else promoted_status(n, config)
        return [RenderedFact(kind=self.kind, key=key, value=value, status=status,
                             confidence=confidence, n_observations=n,
                             last_supporting_event_id=state["last_event_id"],
                             last_updated_ns=state["last_stamp_ns"], conflict=conflict)]


def merge_skill_counts(state: dict[str, Any], partial: dict[str, Any],
                       config: RulesConfig) -> None:
    """Add a partial's counts, success parameters, failure reasons and outcome timeline
    to a skill state (empty: started from the partial's key fields): what every version
    of the skill rule keeps."""
    if not state:
        state.update(skill_id=partial["skill_id"], target_class=partial["target_class"],
                     environment=partial["environment"], n=0, successes=0,
                     success_parameters={}, failure_reasons={})
    state["n"] += partial["n"]
    state["successes"] += partial["successes"]
    for name, bag in partial["success_parameters"].items():
        merge_named_bag(state["success_parameters"], name, bag)
    for reason, count in partial["failure_reasons"].items():
        count_into(state["failure_reasons"], reason, count)
    merge_outcomes(state, partial, config)

"""skill_success_rate: how often a skill succeeds on a target in an environment, and
with which parameters it succeeds (key: skill_id + target_class + environment)."""

from __future__ import annotations

from typing import Any

from robot_memory.consolidation.rules.base import (RULE_VERSION, STATUS_CONTESTED,
                                                   RenderedFact, RulesConfig, count_into,
                                                   fact_key, note_support, promoted_status)
from robot_memory.consolidation.rules.outcomes import add_outcome, contradiction, rate_block
from robot_memory.consolidation.stats import band, most_common, multiset_add, shrunk_rate
from robot_memory.records import ExecutionRecord


class SkillSuccessRate:
    kind = "skill_success_rate"

    def extract(self, record: ExecutionRecord) -> list[tuple[str, ExecutionRecord]]:
        return [(fact_key(record.skill_id, record.target_class, record.environment), record)]

    def fold(self, state: dict[str, Any], record: ExecutionRecord, event_id: int,
             config: RulesConfig) -> None:
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
            count_into(state["failure_reasons"], record.failure_reason or "unspecified")
        add_outcome(state, record, config)
        note_support(state, event_id, record.stamp_ns)

    def render(self, key: str, state: dict[str, Any], config: RulesConfig) -> list[RenderedFact]:
        n, successes = state["n"], state["successes"]
        weighted, confidence = rate_block(state, config)
        conflict = contradiction(state, config)
        value = {
            "skill_id": state["skill_id"], "target_class": state["target_class"],
            "environment": state["environment"], "n": n, "successes": successes,
            "failures": n - successes, "rate": successes / n,
            "weighted": weighted,
            "shrunk_rate": shrunk_rate(weighted["successes"], weighted["n"], config.prior_mean,
                                       config.prior_weight),
            "confidence": confidence,
            "recommended_parameters": {name: {**band(bag), "n": sum(bag.values())}
                                       for name, bag in sorted(state["success_parameters"].items())},
            "failure_reasons": dict(sorted(state["failure_reasons"].items())),
            "most_common_failure": most_common(state["failure_reasons"]),
            "contradiction_test": conflict,
            "rule_version": RULE_VERSION,
        }
        status = STATUS_CONTESTED if conflict["contested"] else promoted_status(n, config)
        return [RenderedFact(self.kind, key, value, status, confidence, n,
                             state["last_event_id"], state["last_stamp_ns"], conflict)]

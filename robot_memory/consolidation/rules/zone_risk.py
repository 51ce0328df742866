"""zone_risk: how risky a zone is (or, for results without a zone, an environment):
attempts, incidents (failures), safety incidents, failure rate, most common failure."""

from __future__ import annotations

from typing import Any

from robot_memory.consolidation.rules.base import (RULE_VERSION, STATUS_CONTESTED,
                                                   RenderedFact, RulesConfig, SkipRecord,
                                                   count_into, fact_key, note_support,
                                                   promoted_status, r6)
from robot_memory.consolidation.rules.outcomes import add_outcome, contradiction, rate_block
from robot_memory.consolidation.stats import most_common
from robot_memory.records import ExecutionRecord


class ZoneRisk:
    kind = "zone_risk"

    def extract(self, record: ExecutionRecord) -> list[tuple[str, ExecutionRecord]]:
        if record.zone:
            return [(fact_key("zone", record.zone), record)]
        if record.environment:
            return [(fact_key("environment", record.environment), record)]
        raise SkipRecord("no_zone_or_environment")

    def fold(self, state: dict[str, Any], record: ExecutionRecord, event_id: int,
             config: RulesConfig) -> None:
        if not state:
            scope, name = ("zone", record.zone) if record.zone else \
                ("environment", record.environment)
            state.update(scope=scope, name=name, n=0, incidents=0, safety_incidents=0,
                         failure_reasons={})
        state["n"] += 1
        if not record.success:
            state["incidents"] += 1
            reason = record.failure_reason or "unspecified"
            count_into(state["failure_reasons"], reason)
            if reason in config.safety_failure_reasons:
                state["safety_incidents"] += 1
        add_outcome(state, record, config)
        note_support(state, event_id, record.stamp_ns)

    def render(self, key: str, state: dict[str, Any], config: RulesConfig) -> list[RenderedFact]:
        n, incidents = state["n"], state["incidents"]
        weighted, confidence = rate_block(state, config)
        conflict = contradiction(state, config)
        value = {"scope": state["scope"], state["scope"]: state["name"], "n": n,
                 "incidents": incidents, "safety_incidents": state["safety_incidents"],
                 "failure_rate": incidents / n,
                 "weighted_failure_rate": r6(1.0 - weighted["rate"]) if weighted["n"] else 0.0,
                 "failure_reasons": dict(sorted(state["failure_reasons"].items())),
                 "most_common_failure": most_common(state["failure_reasons"]),
                 "contradiction_test": conflict, "confidence": confidence,
                 "rule_version": RULE_VERSION}
        status = STATUS_CONTESTED if conflict["contested"] else promoted_status(n, config)
        return [RenderedFact(self.kind, key, value, status, confidence, n, state["last_event_id"],
                             state["last_stamp_ns"], conflict)]

"""zone_risk: how risky a zone is (or, for results without a zone, an environment):
attempts, incidents (failures), safety incidents, failure rate, most common failure."""

from __future__ import annotations

from typing import Any

from robot_memory.consolidation.rules.base import (STATUS_CONTESTED, OneFactPerGroup,
                                                   Partials, RenderedFact, RulesConfig, count_into,
                                                   fact_key, max_support, promoted_status, r6)
from robot_memory.consolidation.rules.outcomes import (merge_outcomes, note_outcome_row,
                                                       rate_view)
from robot_memory.consolidation.stats import most_common
from robot_memory.store import OutcomeRow, ValueBatch


class ZoneRisk(OneFactPerGroup):
    kind = "zone_risk"
    parameter_buckets = False  # reads no parameters

    def add_outcome(self, row: OutcomeRow, config: RulesConfig, into: Partials) -> None:
        groups = into.groups.setdefault(self.kind, {})
        if row.invalid_reason is not None:
            return
        environment, zone, count = row.environment, row.zone, row.count
        success, reason = row.success, row.failure_reason
        if not (zone or environment):
            into.skip(f"{self.kind}:no_zone_or_environment", count)
            return
        scope, name = ("zone", zone) if zone else ("environment", environment)
        key = fact_key(scope, name)
        part = groups.get(key)
        if part is None:
            part = groups[key] = {"scope": scope, "name": name, "n": 0, "incidents": 0,
                                  "safety_incidents": 0, "failure_reasons": {},
                                  "buckets": {}, "last_event_id": 0, "last_stamp_ns": 0}
        part["n"] += count
        if not success:
            part["incidents"] += count
            named = reason or "unspecified"
            count_into(part["failure_reasons"], named, count)
            if named in config.safety_failure_reasons:
                part["safety_incidents"] += count
        note_outcome_row(part, success, reason, row.bucket, count, row.max_event_id,
                         row.max_stamp_ns, config)

    def add_values(self, aggregates: ValueBatch, config: RulesConfig, into: Partials) -> None:
        pass  # no parameters or observations

    def merge(self, state: dict[str, Any], partial: dict[str, Any],
              config: RulesConfig) -> None:
        if not state:
            state.update(scope=partial["scope"], name=partial["name"], n=0, incidents=0,
                         safety_incidents=0, failure_reasons={})
        for counter in ("n", "incidents", "safety_incidents"):
            state[counter] += partial[counter]
        for reason, count in partial["failure_reasons"].items():
            count_into(state["failure_reasons"], reason, count)
        merge_outcomes(state, partial, config)
        max_support(state, partial)

    def render(self, key: str, state: dict[str, Any], config: RulesConfig) -> list[RenderedFact]:
        n, incidents = state["n"], state["incidents"]
        weighted, confidence, conflict = rate_view(state, config)
        value = {"scope": state["scope"], state["scope"]: state["name"], "n": n,
                 "incidents": incidents, "safety_incidents": state["safety_incidents"],
                 "failure_rate": incidents / n,
                 "weighted_failure_rate": r6(1.0 - weighted["rate"]) if weighted["n"] else 0.0,
                 "failure_reasons": dict(sorted(state["failure_reasons"].items())),
                 "most_common_failure": most_common(state["failure_reasons"]),
                 "contradiction_test": conflict, "confidence": confidence,
                 "rule_version": config.rule_version}
        status = STATUS_CONTESTED if conflict["contested"] else promoted_status(n, config)
        return [RenderedFact(kind=self.kind, key=key, value=value, status=status,
                             confidence=confidence, n_observations=n,
                             last_supporting_event_id=state["last_event_id"],
                             last_updated_ns=state["last_stamp_ns"], conflict=conflict,
                             rule_version=config.rule_version)]

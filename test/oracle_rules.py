"""TEST ORACLE ONLY: the rules v1 (and v2.0's skill rule) written one record at a time, as
they were before the set-based pass. The reference engine (oracle_consolidation.py) folds
every record through these and renders with the package's rules; the equivalence tests
require its states and facts to be the bytes the set-based pass gives. An independent second
writing of each rule's adding up: the package writes it once, set-based.

Each per-record rule has `extract(record)` -> [(group, item)] (raising SkipRecord for a
record its kind cannot use) and `fold(state, item, event_id, config, count=1,
support=True)`, which adds one item to its group's state in place: `count` times (-1: an
amended attempt's outcome taken back), noting it as the group's newest support unless
`support` is False (what an amendment moves adds no support:
docs/consolidation.md#amendments).
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from robot_memory.consolidation.rules import RulesConfig, fact_key
from robot_memory.consolidation.rules.base import count_into
from robot_memory.consolidation.rules.outcomes import FAILURE, SAFETY_FAILURE, SUCCESS
from robot_memory.consolidation.rules.timeline import packed, timeline_merge
from robot_memory.consolidation.stats import multiset_add


class SkipRecord(Exception):
    """A record lacks the structured fields a kind needs (counted as `<kind>:<reason>`)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def note_support(state: dict[str, Any], event_id: int, stamp_ns: int,
                 support: bool = True) -> None:
    if not support:  # an amendment's move: the newest support stays as it was
        state.setdefault("last_event_id", 0)
        state.setdefault("last_stamp_ns", 0)
        return
    state["last_event_id"] = max(state.get("last_event_id", 0), event_id)
    state["last_stamp_ns"] = max(state.get("last_stamp_ns", 0), stamp_ns)


def timeline_add(state: dict[str, Any], stamp_ns: int, column: int, width: int,
                 config: RulesConfig, count: int = 1) -> None:
    """`count` events (negative: taken back; 0: the group made, nothing counted) in one
    column of the bucket of stamp_ns."""
    timeline_merge(state, {config.bucket(stamp_ns): packed(column, count)}, width, config,
                   signed=count < 1)


def bag_add(bags: dict[str, dict[str, int]], name: str, value: float, count: int) -> None:
    """multiset_add into bags[name], the name gone once its multiset is empty."""
    multiset_add(bags.setdefault(name, {}), value, count)
    if not bags[name]:
        del bags[name]


def outcome_column(record, config: RulesConfig) -> int:
    if record.success:
        return SUCCESS
    return SAFETY_FAILURE if record.failure_reason in config.safety_failure_reasons else FAILURE


def add_outcome(state: dict[str, Any], record, config: RulesConfig, count: int = 1) -> None:
    timeline_add(state, record.stamp_ns, outcome_column(record, config), 3, config, count)


class SkillSuccessRate:
    kind = "skill_success_rate"

    def extract(self, record) -> list[tuple[str, Any]]:
        return [(fact_key(record.skill_id, record.target_class, record.environment), record)]

    def fold(self, state: dict[str, Any], record, event_id: int,
             config: RulesConfig, count: int = 1, support: bool = True) -> None:
        if not state:
            state.update(skill_id=record.skill_id, target_class=record.target_class,
                         environment=record.environment, n=0, successes=0,
                         success_parameters={}, failure_reasons={})
        state["n"] += count
        if record.success:
            state["successes"] += count
            for name, value in record.parameters.items():
                bag_add(state["success_parameters"], name, value, count)
        else:
            count_into(state["failure_reasons"], record.failure_reason or "unspecified",
                       count)
        add_outcome(state, record, config, count)
        note_support(state, event_id, record.stamp_ns, support)


class InteractionPattern:
    kind = "interaction_pattern"

    def extract(self, record) -> list[tuple[str, Any]]:
        if record.success:
            return []  # successes are not failure patterns; not a skip
        return [(fact_key(record.skill_id, record.target_class), record)]

    def fold(self, state: dict[str, Any], record, event_id: int,
             config: RulesConfig, count: int = 1, support: bool = True) -> None:
        if not state:
            state.update(skill_id=record.skill_id, target_class=record.target_class,
                         failures=0, reasons={})
        reason = record.failure_reason or "unspecified"
        entry = state["reasons"].setdefault(reason, {"count": 0, "parameters": {},
                                                     "last_event_id": 0, "last_stamp_ns": 0})
        state["failures"] += count
        entry["count"] += count
        for name, value in record.parameters.items():
            bag_add(entry["parameters"], name, value, count)
        timeline_add(entry, record.stamp_ns, 0, 1, config, count)
        note_support(entry, event_id, record.stamp_ns, support)


class ObjectProperty:
    kind = "object_property"

    def extract(self, record) -> list[tuple[str, tuple]]:
        if not record.target_class:
            raise SkipRecord("no_target_class")
        if not record.observations:
            raise SkipRecord("no_observations")
        return [(fact_key(record.target_class, name),
                 (record.target_class, name, value, record.stamp_ns))
                for name, value in sorted(record.observations.items())]

    def fold(self, state: dict[str, Any], item: tuple, event_id: int,
             config: RulesConfig, count: int = 1, support: bool = True) -> None:
        target_class, name, value, stamp_ns = item
        if not state:
            state.update(target_class=target_class, property=name, values={})
        multiset_add(state["values"], value, count)
        note_support(state, event_id, stamp_ns, support)


class ZoneRisk:
    kind = "zone_risk"

    def extract(self, record) -> list[tuple[str, Any]]:
        if record.zone:
            return [(fact_key("zone", record.zone), record)]
        if record.environment:
            return [(fact_key("environment", record.environment), record)]
        raise SkipRecord("no_zone_or_environment")

    def fold(self, state: dict[str, Any], record, event_id: int,
             config: RulesConfig, count: int = 1, support: bool = True) -> None:
        if not state:
            scope, name = ("zone", record.zone) if record.zone else \
                ("environment", record.environment)
            state.update(scope=scope, name=name, n=0, incidents=0, safety_incidents=0,
                         failure_reasons={})
        state["n"] += count
        if not record.success:
            state["incidents"] += count
            reason = record.failure_reason or "unspecified"
            count_into(state["failure_reasons"], reason, count)
            if reason in config.safety_failure_reasons:
                state["safety_incidents"] += count
        add_outcome(state, record, config, count)
        note_support(state, event_id, record.stamp_ns, support)


def two_significant_figures(value: float) -> str:
    """The v2.0 grid band of a value, worked out in decimal: the exact value rounded half
    to even at its second significant digit, as repr(float) (0 and -0 alike)."""
    exact = Decimal(float(value))
    if exact == 0:
        return repr(0.0)
    step = Decimal(1).scaleb(exact.adjusted() - 1)
    return repr(float(exact.quantize(step, rounding=ROUND_HALF_EVEN)) + 0.0)


class SkillSuccessRateV2(SkillSuccessRate):
    """v2.0: v1's state, and an outcome timeline per parameter band (in buckets of
    band_bucket_s)."""

    def fold(self, state: dict[str, Any], record, event_id: int,
             config: RulesConfig, count: int = 1, support: bool = True) -> None:
        super().fold(state, record, event_id, config, count, support)
        state.setdefault("bands", {})
        column = outcome_column(record, config)
        for name, value in record.parameters.items():
            bands = state["bands"].setdefault(name, {})
            band = two_significant_figures(value)
            holder = {"timeline": bands[band]} if band in bands else {}
            # Band timelines count in buckets of band_bucket_s.
            timeline_add(holder, record.stamp_ns, column, 3, config.band_config, count)
            bands[band] = holder["timeline"]


# The per-record writing of each kind of the package's rule sets, by version.
PER_RECORD_V1 = {rule.kind: rule for rule in (SkillSuccessRate(), InteractionPattern(),
                                              ObjectProperty(), ZoneRisk())}
PER_RECORD_BY_VERSION = {"v1.0": PER_RECORD_V1,
                         "v2.0": {**PER_RECORD_V1, "skill_success_rate": SkillSuccessRateV2()}}
PER_RECORD = PER_RECORD_BY_VERSION["v2.0"]  # the default version's

"""What every rule v1 shares: configuration, the rendered-fact shape, fact keys, status,
and the event-time timeline that decay and the contradiction test read.

Mergeable state: a rule adds results up into a JSON state using only counts and
multisets, so adding up is commutative and associative, and any cut of the events into
passes gives the same state (and so the same facts, byte for byte). The contract a rule
meets is `Rule` below, documented in docs/rules.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Any, NamedTuple, Protocol

from robot_memory.errors import ConsolidationError
from robot_memory.execution_result import SAFETY_FAILURE_REASONS
from robot_memory.store import FactRow, OutcomeRow, ValueBatch

RULE_VERSION = "v1.0"  # the rules of the paper (rules/__init__.py: RULE_SETS)
RULE_VERSION_V2 = "v2.0"  # skill facts conditional on parameters, with regimes
# Every rule set by version; a new store is consolidated with RulesConfig.rule_version.
RULE_VERSIONS = (RULE_VERSION, RULE_VERSION_V2)
DEFAULT_RULE_VERSION = RULE_VERSION_V2

STATUS_CANDIDATE = "candidate"
STATUS_ACTIVE = "active"
STATUS_CONTESTED = "contested"
STATUS_INVALIDATED = "invalidated"

DAY_S = 86400.0


class ConsolidationConfigError(ConsolidationError):
    """Raised when stored state was built with a different time_bucket_s than configured
    (the buckets would not line up; rebuild with `robot-memory replay`)."""


@dataclass(frozen=True)
class RulesConfig:
    """Knobs of the rules (the consolidator's parameters of the same names)."""

    # A fact stays a candidate (not served as authoritative) below this many observations.
    promotion_min_observations: int = 3
    # Beta prior of the shrunk rate (as in "Episodic-to-Semantic Consolidation
    # Without Identity Drift": mean 0.5, weight 10 pseudo-observations).
    prior_mean: float = 0.5
    prior_weight: float = 10.0
    # Evidence loses half its weight per half-life of EVENT time (stamps, not wall clock).
    half_life_s: float = 30 * DAY_S
    # Safety-relevant failures are remembered longer ("The Yggdrasil Memory Architecture":
    # failures outlast successes).
    safety_half_life_s: float = 120 * DAY_S
    safety_failure_reasons: tuple[str, ...] = SAFETY_FAILURE_REASONS
    # Event time is counted in buckets of this width; fixed for the life of a store.
    time_bucket_s: float = 3600.0
    # Contradiction test: evidence newer than this window vs. the older evidence ...
    recent_window_s: float = 1 * DAY_S
    # ... needs at least this many observations on each side ...
    contest_min_observations: int = 5
    # ... and a two-proportion z statistic at least this large (|z| >= 3: p < 0.003).
    # (v1 applies the test to the rate kinds: skill_success_rate and zone_risk.)
    contest_z: float = 3.0
    # The rule set a new store is consolidated with (RULE_VERSIONS). A store whose facts
    # an earlier version made keeps being consolidated with that one (the pass reports
    # that an upgrade is available), so no state ever mixes two versions.
    rule_version: str = DEFAULT_RULE_VERSION
    # v2.0 change detection (docs/consolidation.md#regimes): a two-sided CUSUM on the
    # success rate of each parameter band against its regime's rate so far. A drift of
    # the rate smaller than change_drift is tolerated; a cumulative excursion of
    # change_threshold (in units of one observation) confirms a change, half of it makes
    # the change suspected.
    change_drift: float = 0.2
    change_threshold: float = 3.5
    # v2.0: the event-time buckets of the parameter bands' timelines, on which change
    # detection runs (a whole multiple of time_bucket_s; fixed for the life of a store).
    band_bucket_s: float = 1 * DAY_S

    def __post_init__(self) -> None:
        if self.rule_version not in RULE_VERSIONS:
            raise ConsolidationConfigError(
                f"rule_version {self.rule_version!r} is not one of {list(RULE_VERSIONS)}")
        ratio = self.band_bucket_s / self.time_bucket_s if self.time_bucket_s > 0 else 0.0
        if ratio < 1 or ratio != int(ratio):
            raise ConsolidationConfigError(
                f"band_bucket_s={self.band_bucket_s} is not a whole multiple of "
                f"time_bucket_s={self.time_bucket_s}")

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> "RulesConfig":
        """From the consolidator's parameters (names match the fields)."""
        known = {name: settings[name] for name in cls.__dataclass_fields__ if name in settings}
        if "safety_failure_reasons" in known:
            known["safety_failure_reasons"] = tuple(known["safety_failure_reasons"])
        return cls(**known)

    def bucket(self, stamp_ns: int) -> int:
        return int(stamp_ns // int(self.time_bucket_s * 1e9))

    def horizon_buckets(self) -> int:
        """Buckets older than this (behind the newest) weigh < 2^-40: folded into 'ancient'."""
        return math.ceil(40 * self.safety_half_life_s / self.time_bucket_s)

    @cached_property
    def band_ratio(self) -> int:
        """Key buckets (time_bucket_s) per band bucket (band_bucket_s)."""
        return int(self.band_bucket_s / self.time_bucket_s)

    @cached_property
    def band_config(self) -> "RulesConfig":
        """This config with band_bucket_s as its time_bucket_s: the one the parameter
        bands' timelines are laid out, folded and decayed with."""
        if self.band_ratio == 1:
            return self
        return replace(self, time_bucket_s=self.band_bucket_s)

    @cached_property
    def recent_window_buckets(self) -> int:
        """The recent window of the contradiction test, in buckets (at least one). Worked
        out once per config: a pass asks once per group it renders."""
        return max(1, math.ceil(self.recent_window_s / self.time_bucket_s))


class RenderedFact(NamedTuple):
    """A fact as a rule renders it: its value still a dict, and the statistics of the
    contradiction test when it ran. A pass stores it as a FactRow (`stored_as`). A
    tuple: a pass renders one per fact it touches."""

    kind: str
    key: str
    value: dict[str, Any]
    status: str
    confidence: float
    n_observations: int
    last_supporting_event_id: int
    last_updated_ns: int
    # Statistics of the contradiction test, when it ran (for the knowledge_conflict event).
    conflict: dict[str, Any] | None = None
    # Rules that made it (an operator's fact says operator/1).
    rule_version: str = RULE_VERSION

    def stored_as(self, row_id: int | None, value_json: str) -> FactRow:
        """The row that stores this fact: row `row_id` (None: a new one), its value as
        `value_json` (the value's canonical JSON)."""
        return FactRow(id=row_id, kind=self.kind, key=self.key, value_json=value_json,
                       status=self.status, confidence=self.confidence,
                       n_observations=self.n_observations, rule_version=self.rule_version,
                       last_supporting_event_id=self.last_supporting_event_id,
                       last_updated_ns=self.last_updated_ns)

    @classmethod
    def of_row(cls, row: FactRow) -> RenderedFact:
        """A stored fact as a rule would render it (no contradiction statistics)."""
        return cls(kind=row.kind, key=row.key, value=row.value, status=row.status,
                   confidence=row.confidence, n_observations=row.n_observations,
                   last_supporting_event_id=row.last_supporting_event_id,
                   last_updated_ns=row.last_updated_ns, rule_version=row.rule_version)


@lru_cache(maxsize=1 << 16)  # a full pass asks for the same keys ~20 times each
def fact_key(*parts: str) -> str:
    """Stable, human-readable key, e.g. 'manipulation.grasp + glass_cup + sim_relaxed'."""
    return " + ".join([part or "-" for part in parts])


@dataclass
class Partials:
    """A range of results aggregated (SQL GROUP BY rows, see Partition.result_aggregates)
    into per-group partial states of each fact kind, plus the skip counts."""

    groups: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # kind -> ..
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str, count: int) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + count


class Rule(Protocol):
    """A consolidation rule: one fact kind, a mergeable JSON state per group.

    A pass adds up a range of results (add_outcome, add_values) into partial states,
    merges each into its group's stored state and renders the facts; `explain` adds up
    one result at a time the same way (consolidation/partials.py). docs/rules.md is this
    contract in full, with a worked example."""

    kind: str
    # True: the rule reads ValueBatch.bucketed_parameters, which a pass then asks the
    # store for (a little more to read); False: ValueBatch.parameters is enough.
    parameter_buckets: bool

    def add_outcome(self, row: OutcomeRow, config: RulesConfig, into: Partials) -> None:
        """Add one GROUP BY row of outcomes (an OutcomeRow of Partition.result_aggregates)
        to the partial states of the groups a range touches."""

    def add_values(self, aggregates: ValueBatch, config: RulesConfig,
                   into: Partials) -> None:
        """Add the range's parameters and observations (value x count)."""

    def merge(self, state: dict[str, Any], partial: dict[str, Any],
              config: RulesConfig) -> None:
        """Add a partial state to a group's state (integer arithmetic only)."""

    def fact_keys(self, group: str, state: dict[str, Any]) -> list[str]:
        """Keys of the facts render() makes from this state (or partial state)."""

    def render(self, group: str, state: dict[str, Any], config: RulesConfig
               ) -> list[RenderedFact]:
        """The group's facts."""


class OneFactPerGroup:
    """For a rule whose group key is its one fact's key."""

    def fact_keys(self, group: str, state: dict[str, Any]) -> list[str]:
        return [group]


def max_support(state: dict[str, Any], partial: dict[str, Any]) -> None:
    """Note a partial's newest supporting event and stamp in a state (both a max, so the
    order of merging does not matter). Written out: max() costs twice as much, once per
    group a pass merges."""
    event_id, last = partial["last_event_id"], state.get("last_event_id", 0)
    state["last_event_id"] = event_id if event_id > last else last
    stamp, last = partial["last_stamp_ns"], state.get("last_stamp_ns", 0)
    state["last_stamp_ns"] = stamp if stamp > last else last


def promoted_status(n: int, config: RulesConfig) -> str:
    return STATUS_ACTIVE if n >= config.promotion_min_observations else STATUS_CANDIDATE


def count_into(counts: dict[str, int], name: str, amount: int = 1) -> None:
    """Add `amount` (negative: an amended attempt's outcome taken back) to a named count;
    a count that comes to 0 is dropped, as if it had never been counted."""
    total = counts.get(name, 0) + amount
    if total:
        counts[name] = total
    else:
        counts.pop(name, None)


def r6(value: float) -> float:
    """Six decimals: facts carry no more precision than evidence can support, and equal
    evidence renders to equal bytes on every platform."""
    return round(value, 6)

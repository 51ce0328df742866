"""Analogies: the known targets most like an unseen one, found by measured properties.

When the robot has no fact of a skill on a target, a planner may ask for the facts of
the known targets nearest to it. This module finds them; `grounding.py` lends their
facts under status ANALOGY, never as the robot's own (docs/analogies.md).

Distance, deterministic (no sampling, no learned embedding):

    z_p      = (value of the asked target - value of the known target) / scale_p
    distance = sqrt(mean of z_p^2 over the properties p measured on both)

The root mean square keeps a distance over one property comparable with one over three.
scale_p depends only on the known targets, never on the query: 1.4826 x the median
absolute deviation (MAD) of p over the known targets (1.4826: a normal's standard
deviation). When the MAD is 0 (half of them or more share one value): 1.2533 x their
mean absolute deviation from the median. When that is 0 too (all equal, or one known
target): |median|, so the difference is relative. When the median is 0 as well: 1.
Distances are rounded to 9 decimals, so that equal distances compare equal whatever the
float rounding, and ties go to the smaller target_class (code-point order).
ROS-free.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from robot_memory.consolidation.rules import STATUS_ACTIVE
from robot_memory.store import FactRow

PROPERTY_KIND = "object_property"
DISTANCE_DECIMALS = 9
MAD_TO_SIGMA = 1.4826  # 1 / Phi^-1(3/4): the MAD of a normal is 0.6745 sigma
MEAN_ABS_DEV_TO_SIGMA = 1.2533  # sqrt(pi / 2): a normal's mean absolute deviation is 0.7979 sigma
QUERY_SOURCE_REQUEST = "request"  # measured by the planner, given in target_properties
QUERY_SOURCE_FACT = "fact"  # the robot's own object_property fact of the asked target
# Rounding to DISTANCE_DECIMALS moves a distance by at most half a unit of the last
# decimal (and a limit by a few float ulps): a distance further than this beyond the
# limit can never round into it, so a search rounds only the rows within it.
ROUNDING_SLACK = 10.0 ** -DISTANCE_DECIMALS
RELATIVE_SLACK = 1e-12


@dataclass(frozen=True)
class AnalogySettings:
    """The grounding_server's analogy parameters (parameters.yaml holds the same
    defaults; a test keeps them equal)."""

    enabled: bool = True
    max_distance: float = 0.5
    k: int = 3


@dataclass(frozen=True)
class Scale:
    """What a property's differences are divided by, and which rule gave it: "mad",
    "mean_abs_dev", "abs_median" or "unit" (the module docstring)."""

    value: float
    source: str


@dataclass(frozen=True)
class ComparedProperty:
    """One property on which the asked target and a known target were compared."""

    name: str
    query_value: float
    query_source: str  # QUERY_SOURCE_REQUEST or QUERY_SOURCE_FACT
    case_value: float  # the median of the known target's object_property fact
    case_fact: FactRow
    scale: Scale


@dataclass(frozen=True)
class Analogy:
    """A known target lent for an unseen one: how far it is, on what, and its facts of
    the skill exactly as a question about it would serve them."""

    target_class: str
    distance: float
    properties: tuple[ComparedProperty, ...]
    facts: tuple[FactRow, ...]


@dataclass(frozen=True)
class Neighbour:
    """A known target within the distance limit, before its facts are looked up."""

    target_class: str
    distance: float
    properties: tuple[ComparedProperty, ...]


Measured = dict[str, dict[str, tuple[float, FactRow]]]  # target -> property -> (median, fact)


def _with_facts(measured: Measured, facts: Iterable[FactRow]) -> tuple[Measured, set[str]]:
    """`measured` (not modified) with the active object_property facts among `facts`
    set and those no longer active removed, and the targets those facts are about."""
    measured = dict(measured)
    copied: set[str] = set()  # targets whose inner dict is this call's own copy
    for fact in facts:
        if fact.kind != PROPERTY_KIND:
            continue
        try:  # a value this cannot read costs its own fact only: it is not compared
            value = fact.peek_value()
            target, name = value["target_class"], value["property"]
            median = float(value["band"]["median"])
            hash((target, name))
        except Exception:
            continue
        if target not in copied:
            measured[target] = dict(measured.get(target, {}))
            copied.add(target)
        if fact.status == STATUS_ACTIVE:
            measured[target][name] = (median, fact)
        else:
            measured[target].pop(name, None)
    for target in copied:
        if not measured[target]:
            del measured[target]
    return measured, copied


def robust_scale(values: np.ndarray) -> Scale:
    """The scale of one property over the known targets (never 0; module docstring)."""
    median = float(np.median(values))
    deviations = np.abs(values - median)
    mad = float(np.median(deviations))
    if mad > 0.0:
        return Scale(MAD_TO_SIGMA * mad, "mad")
    mean_deviation = float(np.mean(deviations))
    if mean_deviation > 0.0:
        return Scale(MEAN_ABS_DEV_TO_SIGMA * mean_deviation, "mean_abs_dev")
    if median != 0.0:
        return Scale(abs(median), "abs_median")
    return Scale(1.0, "unit")


class KnownProperties:
    """The measured properties of every known target (its active object_property
    facts, by band median) as one column per property, aligned on the targets sorted by
    name: a search over 10^4 targets is a few vector operations, and index order is tie
    order. Immutable, like the GroundingIndex that holds it."""

    def __init__(self, facts: Iterable[FactRow]):
        self._build(_with_facts({}, facts)[0])

    def with_changes(self, changed: Iterable[FactRow]) -> KnownProperties:
        """A new table with these facts added, replaced or (no longer active) removed;
        only the changed facts' values are read. This table is left as it is. When
        they only move values (a pass's usual delta), only the columns they move are
        copied and their scales recomputed: a rebuild, at 10^4 targets, held the
        server's interpreter for milliseconds a pass while requests waited."""
        measured, touched = _with_facts(self._measured, changed)
        new = object.__new__(KnownProperties)
        if self._same_layout(measured, touched):
            new._patch(self, measured, touched)
        else:
            new._build(measured)
        return new

    def _same_layout(self, measured: Measured, touched: set[str]) -> bool:
        """Whether `measured` has this table's targets, each measured on the same
        properties (so rows and presence are unchanged), and no NaN value (which a
        build would count as not measured)."""
        for target in touched:
            before, after = self._measured.get(target), measured.get(target)
            if before is None or after is None or before.keys() != after.keys():
                return False
            if any(math.isnan(value) for value, _ in after.values()):
                return False
        return True

    def _patch(self, old: KnownProperties, measured: Measured, touched: set[str]) -> None:
        """What _build would make of `measured`, from `old`'s table (same layout): the
        arrays of unmoved columns are shared, never written once built."""
        self._measured = measured
        self.targets, self._rows = old.targets, old._rows
        self._present, self._complete = old._present, old._complete
        self.columns, self.scales, self._filled = dict(old.columns), dict(old.scales), \
            dict(old._filled)
        moved: dict[str, list[tuple[int, float]]] = {}
        for target in sorted(touched):
            for name, (value, _) in measured[target].items():
                if value != old._measured[target][name][0]:
                    moved.setdefault(name, []).append((old._rows[target], value))
        for name, values in moved.items():
            column, filled = old.columns[name].copy(), old._filled[name].copy()
            for row, value in values:
                column[row] = filled[row] = value
            self.columns[name], self._filled[name] = column, filled
            self.scales[name] = robust_scale(column[self._present[name]])

    def _build(self, measured: Measured) -> None:
        self._measured = measured
        self.targets = sorted(measured)
        self._rows = {target: row for row, target in enumerate(self.targets)}
        self.columns: dict[str, np.ndarray] = {}
        self.scales: dict[str, Scale] = {}
        for name in sorted({name for props in measured.values() for name in props}):
            column = np.array([measured[t][name][0] if name in measured[t] else np.nan
                               for t in self.targets])
            self.columns[name] = column
            self.scales[name] = robust_scale(column[~np.isnan(column)])
        # The columns again without NaN, and where they hold a value: a search adds
        # z^2 x present, with no NaN test per query.
        self._present = {name: ~np.isnan(c) for name, c in self.columns.items()}
        self._filled = {name: np.nan_to_num(c, nan=0.0) for name, c in self.columns.items()}
        # Columns measured on every known target (the usual case): a search over them
        # needs no mask, and every row shares the same count of compared properties.
        self._complete = frozenset(name for name, present in self._present.items()
                                   if present.all())

    def properties_of(self, target_class: str) -> dict[str, tuple[float, FactRow]]:
        """Property name -> (median, fact) of one target; empty if none was measured."""
        return self._measured.get(target_class, {})

    def nearest(self, query: dict[str, tuple[float, str]], max_distance: float,
                exclude: str) -> Iterator[Neighbour]:
        """The known targets (other than `exclude`) within `max_distance` of `query`
        (name -> (value, source)), nearest first, ties by target_class. A target that
        shares no property with the query is not comparable and never listed."""
        compared = [name for name in sorted(query) if name in self.columns]
        if not compared or not self.targets:
            return
        # 0/0 where nothing is shared, inf for a value near the float limit: both are
        # simply not within max_distance, no warning wanted.
        with np.errstate(all="ignore"):
            rows, distance = self._within(self._distances(query, compared), max_distance)
        for row, case_distance in _by_distance_then_row(rows, distance):
            target = self.targets[row]
            if target == exclude:
                continue
            props = self._measured[target]
            yield Neighbour(target, case_distance, tuple(
                ComparedProperty(name, query[name][0], query[name][1], props[name][0],
                                 props[name][1], self.scales[name])
                for name in compared if name in props))

    def _distances(self, query: dict[str, tuple[float, str]],
                   compared: list[str]) -> np.ndarray:
        """Every known target's distance to `query` over `compared`, before rounding
        (NaN where it shares none of them). In place on one array per property: at 10^4
        targets the temporaries cost more than the arithmetic. The operations and their
        order are the module docstring's, so the floats are the same bit for bit."""
        total = None
        for name in compared:  # a fixed order: the same sums, bit for bit
            z = self._filled[name] - query[name][0]
            z /= self.scales[name].value
            z *= z
            if name not in self._complete:
                z *= self._present[name]
            if total is None:
                total = z  # as 0.0 + z: z is never -0.0
            else:
                total += z
        if self._complete.issuperset(compared):
            total /= len(compared)  # every row compares all of them
        else:
            total /= sum(self._present[name].astype(np.int64) for name in compared)
        return np.sqrt(total, out=total)

    @staticmethod
    def _within(distance: np.ndarray,
                max_distance: float) -> tuple[np.ndarray, np.ndarray]:
        """The rows whose rounded distance is at most max_distance (ascending), and those
        rounded distances. Only rows that could round into the limit are rounded."""
        slack = ROUNDING_SLACK + RELATIVE_SLACK * abs(max_distance)
        rows = np.flatnonzero(distance <= max_distance + slack)  # NaN: never
        rounded = np.round(distance[rows], DISTANCE_DECIMALS)
        kept = rounded <= max_distance
        return rows[kept], rounded[kept]

    def comparable(self, names: Iterable[str]) -> list[str]:
        """Those of `names` measured on some known target, sorted."""
        return sorted(name for name in names if name in self.columns)


def _by_distance_then_row(rows: np.ndarray, distance: np.ndarray,
                          first: int = 16) -> Iterator[tuple[int, float]]:
    """`rows` (ascending, i.e. in target_class order) with their distances, by distance,
    equal distances in row order. A caller usually stops after a few, so the nearest
    `first` are sorted first (and every row as far as the last of them: ties are never
    split), then four times as many, and so on: at 10^4 rows, a full sort took most of
    a lookup."""
    size = first
    while rows.size:
        if rows.size > size:
            bound = np.partition(distance, size - 1)[size - 1]
            batch = distance <= bound
        else:
            batch = np.ones(rows.size, dtype=bool)
        batch_rows, batch_distance = rows[batch], distance[batch]
        for i in np.lexsort((batch_rows, batch_distance)):
            yield int(batch_rows[i]), float(batch_distance[i])
        rows, distance = rows[~batch], distance[~batch]
        size *= 4


def audit_entries(analogies: Iterable[Analogy]) -> list[dict]:
    """The analogies of an answer as the consultation audit keeps them: which known
    target, how far, on which properties, and which facts were lent (ids, keys and rule
    versions: enough for `explain` to find the consultation from any of them)."""
    return [{"target_class": a.target_class, "distance": a.distance,
             "properties": [{"name": p.name, "query_value": p.query_value,
                             "query_source": p.query_source, "case_value": p.case_value,
                             "scale": p.scale.value, "scale_source": p.scale.source,
                             "fact_id": p.case_fact.id, "kind": p.case_fact.kind,
                             "key": p.case_fact.key} for p in a.properties],
             "facts": [{"fact_id": f.id, "kind": f.kind, "key": f.key,
                        "rule_version": f.rule_version} for f in a.facts]}
            for a in analogies]

"""Regimes of a rate over an event-time timeline (rules v2.0): where the success rate of
one parameter band changed, found by a deterministic two-sided CUSUM over the band's
buckets in ascending order (docs/consolidation.md#regimes).

Everything here reads a stored timeline (rules/timeline.py layout; columns successes,
failures, safety failures), so a regime is a function of the multiset of events: the same
under any order of arrival and any cut into passes. The statistics are worked out from
integer counts in one fixed order, so equal timelines give equal floats.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate
from operator import mul
from typing import Any

from robot_memory.consolidation.rules.base import RulesConfig, r6
from robot_memory.consolidation.rules.outcomes import FAILURE, SAFETY_FAILURE, SUCCESS
from robot_memory.consolidation.rules.timeline import _keys, _weights

DOWN, UP = "down", "up"


@dataclass
class Series:
    """A timeline as ascending buckets with their counts. `keys[0]` is None when the
    timeline holds folded ('ancient') counts: they come before every kept bucket."""

    keys: list[int | None]
    successes: list[int]
    failures: list[int]  # ordinary failures
    safety: list[int]  # safety-relevant failures
    totals: tuple[int, int, int]  # the sums of the three

    @classmethod
    def of(cls, timeline: dict[str, Any]) -> Series:
        keys: list[int | None] = list(_keys(timeline["first"], timeline["gaps"]))
        size = len(keys)
        columns = [column or [0] * size for column in timeline["columns"]]
        ancient = timeline["ancient"]
        if any(ancient):
            keys.insert(0, None)
            columns = [[old, *column] for old, column in zip(ancient, columns)]
        successes, failures, safety = columns[SUCCESS], columns[FAILURE], columns[SAFETY_FAILURE]
        return cls(keys, successes, failures, safety,
                   (sum(successes), sum(failures), sum(safety)))

    def coarsened(self, ratio: int) -> Series:
        """The same counts in buckets `ratio` times as wide (bucket // ratio: the band
        buckets a key's timeline is read in); itself when ratio is 1."""
        if ratio == 1:
            return self
        keys: list[int | None] = []
        columns: tuple[list[int], list[int], list[int]] = ([], [], [])
        for key, s, f, sf in zip(self.keys, self.successes, self.failures, self.safety):
            wide = None if key is None else key // ratio
            if keys and keys[-1] == wide and wide is not None:
                columns[0][-1] += s
                columns[1][-1] += f
                columns[2][-1] += sf
            else:
                keys.append(wide)
                for column, count in zip(columns, (s, f, sf)):
                    column.append(count)
        return Series(keys, *columns, self.totals)


@dataclass
class Detection:
    """The CUSUM of one band: its confirmed boundaries (bucket, test), and where its
    statistics stand after its newest bucket."""

    boundaries: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    statistic: float = 0.0  # the larger of the two one-sided statistics, now
    direction: str = DOWN
    growing: bool = False  # that statistic's last step was up (the excursion goes on)
    newest: int | None = None  # the band's newest bucket


class Elsewhere:
    """The key's successes after a band's failures, read from the key's own (finer)
    timeline: `key_series` in buckets of time_bucket_s, `ratio` of them per band bucket."""

    def __init__(self, key_series: Series, ratio: int = 1):
        kept = [(key, s, f + sf) for key, s, f, sf in zip(
            key_series.keys, key_series.successes, key_series.failures, key_series.safety)
            if key is not None]
        self.ratio = ratio
        self.keys = [key for key, _, _ in kept]
        self.failing = [key for key, _, failed in kept if failed]
        self.before = key_series.successes[0] if key_series.keys[:1] == [None] else 0
        self.cumulative = list(accumulate((s for _, s, _ in kept), initial=self.before))

    def up_to(self, bucket: int) -> int:
        """The key's successes in its buckets <= bucket (folded ones included)."""
        return self.cumulative[bisect_right(self.keys, bucket)]

    def last_failure(self, band_bucket: int) -> int:
        """The key's newest bucket with a failure up to the end of this band bucket (the
        start of the band bucket when none)."""
        end = (band_bucket + 1) * self.ratio - 1
        at = bisect_right(self.failing, end)
        return self.failing[at - 1] if at and self.failing[at - 1] >= band_bucket * self.ratio \
            else band_bucket * self.ratio

    def after_failures(self, band_bucket: int, until: int | None = None) -> int:
        """The key's successes after its newest failure in this band bucket, up to the end
        of band bucket `until` (None: all)."""
        last = self.up_to(self.keys[-1]) if until is None or not self.keys else \
            self.up_to((until + 1) * self.ratio - 1)
        return last - self.up_to(self.last_failure(band_bucket))


def detect(series: Series, config: RulesConfig, elsewhere: Elsewhere | None = None
           ) -> Detection:
    """Two-sided Bernoulli CUSUM on the success rate, one step per bucket, against the
    regime's rate so far (successes / observations, integers, since the regime began).

    Per bucket of n observations and s successes, with reference rate p0, drift k and
    threshold h: down += n (p0 - k) - s, up += s - n (p0 + k), each floored at 0, and
    each step capped at h / 2, so a single bucket (a day of failures, in band buckets)
    can make a change suspected but never confirm it alone. A bucket is tested once the
    regime holds contest_min_observations observations. When a statistic reaches h, a
    change is confirmed: the new regime starts at the bucket where that excursion began
    (it holds the buckets from there on) and both statistics restart from 0.

    A fall (down) is confirmed only once retested: the retest begins at the band's first
    bucket by whose end the key succeeded contest_min_observations times elsewhere after
    its newest failure in the band's last failing bucket (`elsewhere`: the key's own
    finer timeline; the band's own successes in the bucket not counted), and the fall is
    confirmed when the statistic is at h and the same steps since the retest began
    (floored at 0 the same way, over every later bucket of the excursion) add up to
    h / 2: the band fails again, not once by its usual odds. A bad day of every force, after
    which the skill works again, stays a suspicion: the band is tried again and works.
    Without `elsewhere` (a key without parameters: nothing else to try) no retest is
    asked for."""
    k, h = config.change_drift, config.change_threshold
    cap = h / 2
    least = config.contest_min_observations
    found = Detection()
    if sum(series.totals) <= least:  # no bucket has that many before it: none is tested
        found.newest = series.keys[-1] if series.keys else None
        return found
    regime_s = regime_n = 0
    down = up = 0.0
    down_step = up_step = 0.0
    down_from = up_from = 0  # index where the running excursion began
    # The running fall's retest (None: none began), and its newest failing bucket.
    retest: float | None = None
    last_fall = None
    keys = series.keys
    successes, failures, safety = series.successes, series.failures, series.safety
    for i, key in enumerate(keys):
        s = successes[i]
        n = s + failures[i] + safety[i]
        if n == 0:
            continue
        if regime_n >= least and key is not None:
            p0 = regime_s / regime_n
            down_step = n * (p0 - k) - s
            down_step = cap if down_step > cap else down_step
            if down + down_step > 0.0:
                if down == 0.0:
                    down_from, retest, last_fall = i, None, None
                if retest is None and elsewhere is not None and last_fall is not None and \
                        elsewhere.after_failures(last_fall, key) - s >= least:
                    retest = 0.0  # the skill worked elsewhere since: the retest begins
                if retest is not None:
                    retest = retest + down_step if retest + down_step > 0.0 else 0.0
                if down_step > 0.0:
                    last_fall = key
                down += down_step
            else:
                down = 0.0
            up_step = s - n * (p0 + k)
            up_step = cap if up_step > cap else up_step
            if up + up_step > 0.0:
                if up == 0.0:
                    up_from = i
                up += up_step
            else:
                up = 0.0
            fall = down >= h and (elsewhere is None or (retest or 0.0) >= cap)
            rise = up >= h
            if fall or rise:
                direction, start, statistic = (DOWN, down_from, down) \
                    if fall and (down >= up or not rise) else (UP, up_from, up)
                found.boundaries.append((keys[start], {
                    "statistic": r6(statistic), "threshold": h, "drift": k,
                    "direction": direction, "reference_rate": r6(p0),
                    "confirmed_bucket": key}))
                regime_s = sum(successes[start:i + 1])
                regime_n = regime_s + sum(failures[start:i + 1]) + sum(safety[start:i + 1])
                down = up = down_step = up_step = 0.0
                continue
        regime_s += s
        regime_n += n
    if down >= up:
        found.statistic, found.direction, found.growing = down, DOWN, down_step > 0.0
    else:
        found.statistic, found.direction, found.growing = up, UP, up_step > 0.0
    found.newest = keys[-1] if keys else None
    return found


def regime_counts(series: Series, since: int | None) -> tuple[int, int, int]:
    """Raw (successes, ordinary failures, safety failures) in buckets >= since (all, when
    since is None; folded counts only then)."""
    if since is None:
        return series.totals
    start = _first_at(series.keys, since)
    return (sum(series.successes[start:]), sum(series.failures[start:]),
            sum(series.safety[start:]))


def counts_between(series: Series, since: int | None, until: int) -> tuple[int, int]:
    """Raw (observations, successes) in buckets since <= bucket < until (from the start,
    folded counts included, when since is None)."""
    start, end = _first_at(series.keys, since), _first_at(series.keys, until)
    s = sum(series.successes[start:end])
    return s + sum(series.failures[start:end]) + sum(series.safety[start:end]), s


def weighted_counts(series: Series, since: int | None, newest: int,
                    config: RulesConfig) -> tuple[float, float]:
    """Decay-weighted (observations, successes) in buckets >= since: each bucket weighs
    2^(-age / half-life), age from the key's newest bucket `newest` (safety failures with
    safety_half_life_s). fsum over integer counts times fixed weights: order-free."""
    start = _first_at(series.keys, since)
    keys = series.keys[start:]
    if not keys:
        return 0.0, 0.0
    # Folded counts are older than every kept bucket: weighed as the horizon's age.
    horizon = config.horizon_buckets()
    ages = [horizon if key is None else newest - key for key in keys]
    width = config.time_bucket_s
    weights = _weights(width, config.half_life_s, ages)
    safety_weights = _weights(width, config.safety_half_life_s, ages)
    successes = math.fsum(map(mul, series.successes[start:], weights))
    failures = math.fsum(map(mul, series.failures[start:], weights))
    safety = math.fsum(map(mul, series.safety[start:], safety_weights))
    return successes + failures + safety, successes


def _first_at(keys: list[int | None], since: int | None) -> int:
    """Index of the first bucket >= since (0 when since is None)."""
    if since is None:
        return 0
    for i, key in enumerate(keys):
        if key is not None and key >= since:
            return i
    return len(keys)

"""Exact, order-free statistics for consolidation.

Values are kept as multisets (value -> count) and sums as exact fractions, so merging
evidence in any order or in any number of passes gives the same bits (facts are a
pure function of the events). Conversion to float happens once, when a fact is rendered.
"""

from __future__ import annotations

import math
from fractions import Fraction

Multiset = dict[str, int]  # repr(float) -> count; repr round-trips exactly


def multiset_add(bag: Multiset, value: float, count: int = 1) -> None:
    key = repr(float(value))
    bag[key] = bag.get(key, 0) + count


def multiset_merge(into: Multiset, other: Multiset) -> None:
    for key, count in other.items():
        into[key] = into.get(key, 0) + count


def _sorted_items(bag: Multiset) -> list[tuple[float, int]]:
    # Floats compare exactly; Fractions are only needed to interpolate (see _quantile).
    return sorted((float(k), c) for k, c in bag.items() if c > 0)


def quantile(bag: Multiset, p: float) -> float:
    """Linear-interpolation quantile (numpy's default), computed exactly."""
    return _quantile(_sorted_items(bag), p)


def _quantile(items: list[tuple[float, int]], p: float) -> float:
    n = sum(c for _, c in items)
    if n == 0:
        raise ValueError("quantile of an empty multiset")
    position = Fraction(p) * (n - 1)
    low_index = math.floor(position)
    frac = position - low_index

    def nth(index: int) -> float:
        seen = 0
        for value, count in items:
            seen += count
            if index < seen:
                return value
        return items[-1][0]

    low = nth(low_index)
    high = nth(min(low_index + 1, n - 1))
    if frac == 0 or low == high:
        return low
    return float(Fraction(low) + (Fraction(high) - Fraction(low)) * frac)


def band(bag: Multiset) -> dict[str, float]:
    """Median and interquartile band: robust to a few wild attempts."""
    items = _sorted_items(bag)  # once: exact conversion and sorting dominate the cost
    return {"median": _quantile(items, 0.5), "q1": _quantile(items, 0.25),
            "q3": _quantile(items, 0.75), "min": items[0][0], "max": items[-1][0]}


def exact_mean(bag: Multiset) -> float:
    items = _sorted_items(bag)
    n = sum(c for _, c in items)
    return float(sum(Fraction(v) * c for v, c in items) / n)


def shrunk_rate(successes: float, n: float, prior_mean: float, prior_weight: float) -> float:
    """Bayesian (beta-prior) shrinkage of a rate toward prior_mean with prior_weight pseudo-counts."""
    return round((successes + prior_mean * prior_weight) / (n + prior_weight), 6)


def most_common(counts: dict[str, int]) -> str | None:
    """Highest count; ties broken by name so the answer never depends on insertion order."""
    if not counts:
        return None
    return min(counts.items(), key=lambda item: (-item[1], item[0]))[0]


def two_proportion_z(k1: int, n1: int, k2: int, n2: int) -> float:
    """Pooled two-proportion z statistic (k1/n1 vs k2/n2); 0 when undefined."""
    if n1 == 0 or n2 == 0:
        return 0.0
    pooled = (k1 + k2) / (n1 + n2)
    spread = pooled * (1 - pooled) * (1 / n1 + 1 / n2)
    if spread <= 0:
        return 0.0
    return (k1 / n1 - k2 / n2) / math.sqrt(spread)


def wilson_confidence(successes: float, n: float) -> float:
    """Confidence of a rate: 1 - width of its 95% Wilson score interval. Grows with the
    (decay-weighted) number of observations, lowest when outcomes split 50/50."""
    if n <= 0:
        return 0.0
    low, high = wilson_interval(successes, n)
    return round(1.0 - (high - low), 6)


def wilson_interval(successes: float, n: float,
                          z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval of a binomial rate; sensible at small n and near 0 or 1."""
    p = min(1.0, max(0.0, successes / n))
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)

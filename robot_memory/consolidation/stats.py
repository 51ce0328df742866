"""Exact, order-free statistics for consolidation.

Values are kept as multisets (value -> count) and sums as exact fractions, so merging
evidence in any order or in any number of passes gives the same bits (facts are a
pure function of the events). Conversion to float happens once, when a fact is rendered.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from functools import partial
from itertools import accumulate

import numpy as np

Multiset = dict[str, int]  # repr(float) -> count; repr round-trips exactly
NUMPY_FROM = 64  # distinct values from which quantiles use numpy arrays


def multiset_add(bag: Multiset, value: float, count: int = 1) -> None:
    """Add `count` (negative: an amended attempt's outcome taken back) of a value; a
    value whose count comes to 0 is dropped, as if it had never been counted."""
    key = repr(float(value))
    total = bag.get(key, 0) + count
    if total:
        bag[key] = total
    else:
        bag.pop(key, None)


def multiset_merge(into: Multiset, other: Multiset) -> None:
    """Add a multiset (whose counts may be negative: see multiset_add) into another."""
    for key, count in other.items():
        total = into.get(key, 0) + count
        if total:
            into[key] = total
        else:
            into.pop(key, None)


def merge_named_bag(bags: dict[str, Multiset], name: str, bag: Multiset) -> None:
    """multiset_merge into bags[name], dropping the name once its multiset is empty."""
    into = bags.setdefault(name, {})
    multiset_merge(into, bag)
    if not into:
        del bags[name]


# The ascending (value, key) order of a small bag's keys, by its keys in the bag's own
# order: a pass renders hundreds of bags over the same few values (the parameter grid of
# a skill), and parsing a float costs 0.2 us, more than looking up all the keys.
_ORDERS: dict[tuple[str, ...], list[tuple[float, str]]] = {}
_ORDER_KEYS = 16  # bags of more distinct values are sorted each time
_ORDERS_KEPT = 4096  # orders kept; the cache starts afresh beyond this


def _sorted_items(bag: Multiset) -> list[tuple[float, int]]:
    # Floats compare exactly. 0.0 and -0.0 compare equal: the key text orders them, so the
    # order (and min/max) never depends on which was counted first.
    if len(bag) > _ORDER_KEYS:
        triples = [(float(k), k, c) for k, c in bag.items() if c > 0]
        triples.sort()
        return [(value, count) for value, _key, count in triples]
    keys = tuple(bag)
    order = _ORDERS.get(keys)
    if order is None:
        if len(_ORDERS) >= _ORDERS_KEPT:
            _ORDERS.clear()
        order = _ORDERS[keys] = sorted([(float(k), k) for k in keys])
    return [(value, count) for value, key in order if (count := bag[key]) > 0]


def quantile(bag: Multiset, p: float) -> float:
    """Linear-interpolation quantile (numpy's default), computed exactly."""
    return _quantile(_sorted_items(bag), p)


_RATIOS: dict[float, tuple[int, int]] = {}  # p -> its exact ratio (a few distinct p)


def _ratio(p: float) -> tuple[int, int]:
    ratio = _RATIOS.get(p)
    if ratio is None:
        ratio = _RATIOS[p] = float(p).as_integer_ratio()  # exact, as Fraction(p)
    return ratio


def _quantiles(items: list[tuple[float, int]], ps: tuple[float, ...]) -> list[float]:
    """Exact linear-interpolation quantiles of (value, count) items sorted by value.

    Integer arithmetic on the floats' exact ratios: position p*(n-1) splits into an
    index and a fraction r/d; the result low + (high - low) * r/d is one correctly
    rounded int / int division (what float(Fraction) computes, at a fraction of the cost).
    items[i] covers positions ends[i-1] .. ends[i]-1.
    """
    if len(items) > NUMPY_FROM:
        ends = np.cumsum(np.fromiter((c for _, c in items), dtype=np.int64, count=len(items)))
        n = int(ends[-1])

        def index_of(position: int) -> int:
            return int(np.searchsorted(ends, position, side="right"))
    else:  # a few distinct values: numpy's call overhead would cost more than the work
        ends = list(accumulate([c for _, c in items]))
        n = ends[-1]
        index_of = partial(bisect_right, ends)
    last = n - 1
    out = []
    for p in ps:
        p_num, p_den = _RATIOS.get(p) or _ratio(p)
        low_index, rest = divmod(p_num * last, p_den)
        low = items[index_of(low_index)][0]
        if rest == 0:
            out.append(low)
            continue
        high = items[index_of(low_index + 1 if low_index < last else last)][0]
        out.append(low if low == high else _between(low, high, rest, p_den))
    return out


def _between(low: float, high: float, rest: int, p_den: int) -> float:
    """low + (high - low) * rest / p_den, correctly rounded: one int / int division of
    the floats' exact ratios."""
    l_num, l_den = low.as_integer_ratio()
    h_num, h_den = high.as_integer_ratio()
    return (l_num * h_den * (p_den - rest) + h_num * l_den * rest) / (l_den * h_den * p_den)


def _quantile(items: list[tuple[float, int]], p: float) -> float:
    if not items or sum(c for _, c in items) == 0:
        raise ValueError("quantile of an empty multiset")
    return _quantiles(items, (p,))[0]


_QUARTILES = (0.25, 0.5, 0.75)


def band(bag: Multiset) -> dict[str, float]:
    """Median and interquartile band: robust to a few wild attempts."""
    items = _sorted_items(bag)  # once: exact conversion and sorting dominate the cost
    q1, median, q3 = _quantiles(items, _QUARTILES)
    return {"median": median, "q1": q1, "q3": q3, "min": items[0][0], "max": items[-1][0]}


def band_with_n(bag: Multiset) -> dict[str, float | int]:
    """band and the number of values, in the key order the facts write them."""
    out = band(bag)
    out["n"] = sum(bag.values())
    return out


# A small bag's common denominator and each key's numerator over it, by its keys in the
# bag's own order (bounded as _ORDERS is): a pass works out the mean of hundreds of bags
# over the same few values.
_OVER_COMMON: dict[tuple[str, ...], tuple[int, list[tuple[str, int]]]] = {}


def _over_common(keys: tuple[str, ...]) -> tuple[int, list[tuple[str, int]]]:
    ratios = [(key, float(key).as_integer_ratio()) for key in keys]
    common = max([den for _, (_, den) in ratios])
    return common, [(key, num * (common // den)) for key, (num, den) in ratios]


def exact_mean(bag: Multiset) -> float:
    """The exact mean, rounded once: the values are dyadic rationals, so over a common
    power-of-two denominator the sum is an integer. (int / int is correctly rounded, so
    any common power of two gives the same float.)"""
    if len(bag) > _ORDER_KEYS:
        common, numerators = _over_common(tuple(key for key, c in bag.items() if c > 0))
    else:
        keys = tuple(bag)
        cached = _OVER_COMMON.get(keys)
        if cached is None:
            if len(_OVER_COMMON) >= _ORDERS_KEPT:
                _OVER_COMMON.clear()
            cached = _OVER_COMMON[keys] = _over_common(keys)
        common, numerators = cached
    total = n = 0
    for key, numerator in numerators:
        count = bag[key]
        if count > 0:
            total += numerator * count
            n += count
    if not n:
        raise ValueError("mean of an empty multiset")
    return total / (common * n)


def shrunk_rate(successes: float, n: float, prior_mean: float, prior_weight: float) -> float:
    """Bayesian (beta-prior) shrinkage of a rate toward prior_mean with prior_weight
    pseudo-counts."""
    return round((successes + prior_mean * prior_weight) / (n + prior_weight), 6)


def most_common(counts: dict[str, int]) -> str | None:
    """Highest count; ties broken by name so the answer never depends on insertion order."""
    if len(counts) < 2:  # none, or one (a group mostly fails one way): nothing to order
        return next(iter(counts), None)
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
    # Clamped to [0, 1] with conditionals, not min() and max(): the same floats (max(0.0, x)
    # is x only when x > 0.0, min(1.0, x) only when x < 1.0) at half the cost of the
    # interval, which a pass works out for every fact it renders.
    p = successes / n
    p = (p if p < 1.0 else 1.0) if p > 0.0 else 0.0
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    low, high = centre - half, centre + half
    return (low if low > 0.0 else 0.0), (high if high < 1.0 else 1.0)

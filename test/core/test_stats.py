"""consolidation/stats.py against known values: published Wilson intervals, scipy's
Wilson interval and chi-square test, numpy's quantiles, exact arithmetic."""

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as scipy_stats

from robot_memory.consolidation.stats import (band, exact_mean, most_common, multiset_add,
                                              multiset_merge, quantile, shrunk_rate,
                                              two_proportion_z, wilson_confidence,
                                              wilson_interval)

# Newcombe, "Two-sided confidence intervals for the single proportion: comparison of
# seven methods", Statistics in Medicine 17 (1998), Table II, method 3 (score interval
# without continuity correction), to the four decimals printed there.
NEWCOMBE_WILSON = [
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0000, 0.1611),
    (1, 29, 0.0061, 0.1718),
]


@pytest.mark.parametrize("successes, n, low, high", NEWCOMBE_WILSON)
def test_wilson_interval_matches_the_published_table(successes, n, low, high):
    got_low, got_high = wilson_interval(successes, n)
    assert round(got_low, 4) == low and round(got_high, 4) == high


def test_wilson_interval_matches_scipy_everywhere():
    for n in (1, 2, 5, 16, 37, 100, 1000):
        for successes in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            expected = scipy_stats.binomtest(successes, n).proportion_ci(
                confidence_level=0.95, method="wilson")
            low, high = wilson_interval(successes, n)
            assert low == pytest.approx(expected.low, abs=1e-12), (successes, n)
            assert high == pytest.approx(expected.high, abs=1e-12), (successes, n)


def test_wilson_z_is_the_95_percent_normal_quantile():
    assert wilson_interval.__defaults__[0] == scipy_stats.norm.ppf(0.975)


def test_wilson_confidence_figures_quoted_in_the_readme():
    assert wilson_confidence(12, 16) == pytest.approx(0.61, abs=0.005)
    assert wilson_confidence(800, 1000) == pytest.approx(0.95, abs=0.005)
    assert wilson_confidence(0, 0) == 0.0
    # grows with n at a fixed rate, lowest at a 50/50 split for a fixed n
    assert wilson_confidence(8, 10) < wilson_confidence(80, 100) < wilson_confidence(800, 1000)
    assert min(range(21), key=lambda k: wilson_confidence(k, 20)) == 10


@pytest.mark.parametrize("k1, n1, k2, n2", [
    (12, 16, 3, 16), (90, 100, 40, 100), (5, 50, 9, 60), (1, 3, 2, 3), (400, 1000, 420, 1000),
])
def test_two_proportion_z_matches_scipy_chi_square(k1, n1, k2, n2):
    z = two_proportion_z(k1, n1, k2, n2)
    table = [[k1, n1 - k1], [k2, n2 - k2]]
    chi2, p_value, _, _ = scipy_stats.chi2_contingency(table, correction=False)
    assert z * z == pytest.approx(chi2, rel=1e-12)
    assert 2 * scipy_stats.norm.sf(abs(z)) == pytest.approx(p_value, rel=1e-9)
    assert math.copysign(1, z) == math.copysign(1, k1 / n1 - k2 / n2)


def test_two_proportion_z_is_zero_when_undefined():
    assert two_proportion_z(0, 0, 3, 5) == 0.0
    assert two_proportion_z(5, 5, 7, 7) == 0.0  # pooled rate 1: no spread
    assert two_proportion_z(0, 5, 0, 7) == 0.0


def test_contest_threshold_is_the_quoted_p_value():
    # docs/consolidation.md: |z| >= 3.0 is p < 0.003 (two-sided)
    assert 2 * scipy_stats.norm.sf(3.0) < 0.003


def test_quantiles_and_band_match_numpy_linear_interpolation():
    rng = random.Random(7)
    values = [round(rng.uniform(0, 50), 3) for _ in range(101)] + [12.5] * 9
    bag = {}
    for value in values:
        multiset_add(bag, value)
    for p in (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0):
        assert quantile(bag, p) == pytest.approx(float(np.quantile(values, p)), abs=1e-12)
    summary = band(bag)
    assert summary["median"] == pytest.approx(float(np.median(values)), abs=1e-12)
    assert (summary["min"], summary["max"]) == (min(values), max(values))
    with pytest.raises(ValueError):
        quantile({}, 0.5)


def test_exact_mean_is_exact_and_order_free():
    # The exact rational mean, rounded once, in whatever order the values are counted. The
    # data defeats left-to-right float addition (1.0 and the 0.1s vanish next to 1e16), so
    # an inexact mean could not pass. Built-in sum() is not the reference: from Python 3.12
    # it compensates float sums.
    values = [0.1] * 10 + [1e16, 1.0, -1e16]
    expected = float(sum(Fraction(v) for v in values) / len(values))
    naive = 0.0
    for value in values:
        naive += value
    assert naive / len(values) != expected
    rng = random.Random(7)
    orders = [values, values[::-1]] + [rng.sample(values, len(values)) for _ in range(20)]
    for order in orders:
        bag = {}
        for value in order:
            multiset_add(bag, value)
        assert exact_mean(bag) == expected, order


def test_merging_multisets_is_adding_them():
    left, right, both = {}, {}, {}
    for i, value in enumerate([1.5, 2.0, 1.5, 3.25, 2.0, 2.0]):
        multiset_add(left if i % 2 else right, value)
        multiset_add(both, value)
    multiset_merge(left, right)
    assert left == both == {"1.5": 2, "2.0": 3, "3.25": 1}


def test_shrunk_rate_and_most_common():
    assert shrunk_rate(12, 16, 0.5, 10) == round(17 / 26, 6)
    assert shrunk_rate(0, 0, 0.5, 10) == 0.5
    assert most_common({"slipped": 3, "dropped": 3, "collision": 1}) == "dropped"
    assert most_common({}) is None


def test_bands_of_a_few_values_are_the_exact_quantiles():
    """band's quartiles of a few distinct values (up to NUMPY_FROM: the path without
    numpy) give the bits of the exact rational quantile, rounded once: signed zeros,
    ties, tiny and huge values included."""
    from robot_memory.consolidation.stats import NUMPY_FROM, _quantiles, _sorted_items
    rng = random.Random(12)
    pool = [0.0, -0.0, 1e-300, -2.5, 5.0, 10.0, 0.1, 0.2, 1e17, 3.0000000000000004]
    for _ in range(2000):
        bag = {}
        for _ in range(rng.randrange(1, 12)):
            multiset_add(bag, rng.choice(pool) if rng.random() < 0.5
                         else rng.uniform(-50, 50), rng.randrange(1, 9))
        got = band(bag)
        items = _sorted_items(bag)
        assert len(items) <= NUMPY_FROM
        general = _quantiles(items, (0.25, 0.5, 0.75))
        n = sum(bag.values())
        exact = []
        for p in (0.25, 0.5, 0.75):  # the definition, in exact rationals
            position = Fraction(p) * (n - 1)
            low = math.floor(position)
            values = [v for v, c in items for _ in range(c)]
            a, b = values[low], values[min(low + 1, n - 1)]
            exact.append(a if a == b or position == low else float(
                Fraction(a) + (Fraction(b) - Fraction(a)) * (position - low)))
        assert [repr(q) for q in (got["q1"], got["median"], got["q3"])] == \
            [repr(q) for q in general] == [repr(q) for q in exact]

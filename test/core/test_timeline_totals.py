"""Decay and the contradiction windows read from cached per-bucket weights: the same
floats as the formula, whether a timeline's buckets were seen before or not, short or
long; and a pass leaves the garbage collector as it found it."""

import gc
import math
import random

import pytest

from helpers import result_event
from robot_memory.consolidation import RulesConfig, consolidation_pass
from robot_memory.consolidation.rules.timeline import (_VIEW_RUNS_KEPT, decayed_totals,
                                                       recent_and_older)
from robot_memory.store import MemoryStore

HALF_LIVES = [3600.0, 3600.0, 86400.0]


def formula_totals(state, half_lives, config):
    """decayed_totals written straight from its definition."""
    timeline = state["timeline"]
    newest, width = timeline["newest"], config.time_bucket_s
    return [math.fsum([row[c] * 2.0 ** (-(newest - int(b)) * width / half_life)
                       for b, row in timeline["buckets"].items() if row[c]])
            for c, half_life in enumerate(half_lives)]


def formula_recent_and_older(state, config):
    timeline = state["timeline"]
    window = max(1, math.ceil(config.recent_window_s / config.time_bucket_s))
    recent, older = [0, 0, 0], list(timeline["ancient"])
    for b, row in timeline["buckets"].items():
        side = recent if int(b) > timeline["newest"] - window else older
        for c, count in enumerate(row):
            side[c] += count
    return recent, older


def random_state(rng, buckets):
    newest = 400_000 + rng.randrange(50)
    keys = rng.sample(range(newest - 3 * buckets, newest + 1), buckets - 1) + [newest]
    rng.shuffle(keys)
    return {"timeline": {"bucket_s": 3600.0, "newest": newest, "oldest": min(keys),
                         "ancient": [rng.randrange(5), rng.randrange(5), rng.randrange(5)],
                         "buckets": {str(k): [rng.randrange(4), rng.randrange(4),
                                              rng.randrange(2)] for k in keys}}}


@pytest.mark.parametrize("buckets", [1, 5, 40, 4 * _VIEW_RUNS_KEPT])
def test_cached_weights_give_the_formula_bits(buckets):
    rng = random.Random(buckets)
    config = RulesConfig(time_bucket_s=3600.0, recent_window_s=6 * 3600.0)
    states = [random_state(rng, buckets) for _ in range(30)]
    for _ in range(2):  # the second round reads what the first one cached
        for state in states:
            assert decayed_totals(state, HALF_LIVES, config) == \
                formula_totals(state, HALF_LIVES, config)
            assert recent_and_older(state, config) == formula_recent_and_older(state, config)


def test_a_pass_leaves_the_collector_as_it_found_it(db_url):
    part = MemoryStore(db_url).partition("c" * 64)
    part.append_many([result_event(i, success=i % 3 != 0) for i in range(20)])
    assert gc.isenabled()
    consolidation_pass(part)
    assert gc.isenabled()
    gc.disable()
    try:
        part.append_many([result_event(20 + i) for i in range(5)])
        consolidation_pass(part)
        assert not gc.isenabled()
    finally:
        gc.enable()

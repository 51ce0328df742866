"""Per-key event-time timeline: outcome counts per time bucket.

State layout: state["timeline"] = {"bucket_s": w, "buckets": {"<bucket>": [c0, c1, ...]},
"ancient": [c0, c1, ...]}. Column meaning is up to the rule (e.g. successes, failures,
safety failures). Buckets far behind the newest are folded into "ancient"; because the
newest bucket only grows, the fold is the same whatever the pass boundaries.
"""

from __future__ import annotations

import math
from itertools import compress
from typing import Any

from robot_memory.consolidation.rules.base import ConsolidationConfigError, RulesConfig



def _timeline_of(state: dict[str, Any], width: int, config: RulesConfig) -> dict[str, Any]:
    """The state's timeline, made empty on first use; ConsolidationConfigError when it was
    built with another time_bucket_s (its buckets would not line up)."""
    timeline = state.get("timeline")
    if timeline is None:
        timeline = state["timeline"] = {"bucket_s": config.time_bucket_s, "buckets": {},
                                        "ancient": [0] * width, "newest": None,
                                        "oldest": None}
    elif timeline["bucket_s"] != config.time_bucket_s:
        raise ConsolidationConfigError(
            f"state was built with time_bucket_s={timeline['bucket_s']}, config says "
            f"{config.time_bucket_s}; rebuild the facts with `robot-memory replay`")
    return timeline

def timeline_add(state: dict[str, Any], stamp_ns: int, column: int, width: int,
                 config: RulesConfig) -> None:
    timeline = _timeline_of(state, width, config)
    bucket = config.bucket(stamp_ns)
    newest = timeline["newest"]
    if newest is None or bucket > newest:
        newest = timeline["newest"] = bucket
        _fold_stale(timeline, newest - config.horizon_buckets())
    if bucket < newest - config.horizon_buckets():
        timeline["ancient"][column] += 1
    else:
        row = timeline["buckets"].get(str(bucket))
        if row is None:
            row = timeline["buckets"][str(bucket)] = [0] * width
            if timeline["oldest"] is None or bucket < timeline["oldest"]:
                timeline["oldest"] = bucket
        row[column] += 1


def _fold_stale(timeline: dict[str, Any], oldest_kept: int) -> None:
    """Move buckets older than the horizon into 'ancient' (only when the newest moves;
    'oldest' makes the common nothing-to-do case O(1))."""
    if timeline["oldest"] is None or timeline["oldest"] >= oldest_kept:
        return
    for stale in [b for b in timeline["buckets"] if int(b) < oldest_kept]:
        for i, count in enumerate(timeline["buckets"].pop(stale)):
            timeline["ancient"][i] += count
    timeline["oldest"] = min(map(int, timeline["buckets"]), default=None)


# Decay weights by (bucket width, half-life) and age in buckets: every group of a pass
# shares the few hundred ages there are, so each weight is computed once per process.
_WEIGHTS: dict[tuple[float, float], dict[int, float]] = {}
_WEIGHTS_KEPT = 1 << 16  # ages per table; a table is started afresh beyond this


def _weights(width: float, half_life: float, ages: list[int]) -> list[float]:
    """2^(-age * width / half_life) for each age, from the table when known."""
    table = _WEIGHTS.get((width, half_life))
    if table is None or len(table) > _WEIGHTS_KEPT:
        table = _WEIGHTS[(width, half_life)] = {}
    try:
        return [table[age] for age in ages]
    except KeyError:
        for age in ages:
            if age not in table:
                table[age] = 2.0 ** (-age * width / half_life)
        return [table[age] for age in ages]


# What a timeline's bucket keys mean for decay and the contradiction test depends only
# on the keys, the newest bucket and the config. The groups of a pass mostly share them
# (the same recent hours), so each short combination is worked out once: the weight of
# every bucket per half-life and which buckets are recent.
_VIEWS: dict[tuple, tuple[dict[float, list[float]], list[bool], list[bool]]] = {}
_VIEWS_KEPT = 512  # combinations kept (a few KB each); the cache starts afresh beyond this
_VIEW_KEYS_KEPT = 256  # longer timelines are worked out each time (from _WEIGHTS)


def _view(keys: tuple[str, ...], newest: int, width: float, window: int,
          half_lives_s: tuple[float, ...]
          ) -> tuple[dict[float, list[float]], list[bool], list[bool]]:
    """(half-life -> weight of each bucket, is-recent mask, is-older mask) of these keys."""
    cache_key = (keys, newest, width, window, half_lives_s)
    view = _VIEWS.get(cache_key)
    if view is None:
        ages = [newest - int(b) for b in keys]
        view = ({half_life: _weights(width, half_life, ages) for half_life in half_lives_s},
                [age < window for age in ages], [age >= window for age in ages])
        if len(keys) <= _VIEW_KEYS_KEPT:
            if len(_VIEWS) >= _VIEWS_KEPT:
                _VIEWS.clear()
            _VIEWS[cache_key] = view
    return view


def timeline_totals(state: dict[str, Any], half_lives_s: list[float], config: RulesConfig
                    ) -> tuple[list[float], list[int], list[int]]:
    """decayed_totals and recent_and_older in one walk over the buckets (list
    comprehensions over columns: a Python loop per bucket and column costs 3x)."""
    timeline = state["timeline"]
    buckets, ancient = timeline["buckets"], timeline["ancient"]
    width = config.time_bucket_s
    weights_of, recent_mask, older_mask = _view(
        tuple(buckets), timeline["newest"], width,
        max(1, math.ceil(config.recent_window_s / width)), tuple(half_lives_s))
    rows = list(buckets.values())
    columns = list(zip(*rows)) if rows else [()] * len(ancient)
    # fsum over exact integer counts times fixed weights: independent of order.
    totals = [math.fsum([count * weight for count, weight in zip(column, weights_of[half_life])
                         if count])
              for half_life, column in zip(half_lives_s, columns)]
    recent_rows = list(compress(rows, recent_mask))
    # Integer column sums: exact in any order.
    recent = [sum(c) for c in zip(*recent_rows)] if recent_rows else [0] * len(ancient)
    return totals, recent, [sum(c) for c in zip(ancient, *compress(rows, older_mask))]


def decayed_totals(state: dict[str, Any], half_lives_s: list[float],
                   config: RulesConfig) -> list[float]:
    """Sum of each column weighted by 2^(-age / half_life), age in event time from the
    newest bucket. fsum over exact integer counts: independent of order."""
    return timeline_totals(state, half_lives_s, config)[0]


def recent_and_older(state: dict[str, Any], config: RulesConfig) -> tuple[list[int], list[int]]:
    """Raw counts per column inside the recent window and before it (ancient included)."""
    _, recent, older = timeline_totals(state, [], config)
    return recent, older


def timeline_merge(state: dict[str, Any], counts: dict[int, list[int]], width: int,
                   config: RulesConfig) -> None:
    """Add per-bucket counts (from a GROUP BY) to the timeline: the same state as
    timeline_add once per counted event, in any order (the horizon fold depends only
    on the newest bucket, which only grows)."""
    timeline = _timeline_of(state, width, config)
    if not counts:
        return
    newest = max(counts) if timeline["newest"] is None else max(timeline["newest"],
                                                                 max(counts))
    timeline["newest"] = newest
    oldest_kept = newest - config.horizon_buckets()
    kept, ancient = timeline["buckets"], timeline["ancient"]
    for bucket, row in counts.items():
        if bucket < oldest_kept:
            for i, count in enumerate(row):
                ancient[i] += count
            continue
        into = kept.get(str(bucket))
        if into is None:
            kept[str(bucket)] = list(row)
        else:
            for i, count in enumerate(row):
                into[i] += count
    if timeline["oldest"] is not None and timeline["oldest"] < oldest_kept:
        _fold_stale(timeline, oldest_kept)
    timeline["oldest"] = min(map(int, kept), default=None)

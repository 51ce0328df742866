"""Per-key event-time timeline: outcome counts per time bucket.

State layout: state["timeline"] = {"bucket_s": w, "buckets": {"<bucket>": [c0, c1, ...]},
"ancient": [c0, c1, ...]}. Column meaning is up to the rule (e.g. successes, failures,
safety failures). Buckets far behind the newest are folded into "ancient"; because the
newest bucket only grows, the fold is the same whatever the pass boundaries.
"""

from __future__ import annotations

import math
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


def newest_bucket(state: dict[str, Any]) -> int:
    return state["timeline"]["newest"]


def decayed_totals(state: dict[str, Any], half_lives_s: list[float],
                   config: RulesConfig) -> list[float]:
    """Sum of each column weighted by 2^(-age / half_life), age in event time from the
    newest bucket. fsum over exact integer counts: independent of order."""
    newest = newest_bucket(state)
    width = config.time_bucket_s
    ages, rows = [], []
    for b, row in state["timeline"]["buckets"].items():  # keys parsed once, not per column
        ages.append(newest - int(b))
        rows.append(row)
    totals, weights_of = [], {}
    for column, half_life in enumerate(half_lives_s):
        weights = weights_of.get(half_life)  # columns with one half-life share the weights
        if weights is None:
            weights = weights_of[half_life] = [2.0 ** (-age * width / half_life)
                                               for age in ages]
        totals.append(math.fsum([row[column] * weight for row, weight in zip(rows, weights)
                                 if row[column]]))
    return totals


def recent_and_older(state: dict[str, Any], config: RulesConfig) -> tuple[list[int], list[int]]:
    """Raw counts per column inside the recent window and before it (ancient included)."""
    timeline = state["timeline"]
    newest = newest_bucket(state)
    window = max(1, math.ceil(config.recent_window_s / config.time_bucket_s))
    recent_rows, older_rows = [], [timeline["ancient"]]
    for b, row in timeline["buckets"].items():
        (recent_rows if int(b) > newest - window else older_rows).append(row)
    width = len(timeline["ancient"])
    # Integer column sums: exact in any order.
    recent = [sum(column) for column in zip(*recent_rows)] if recent_rows else [0] * width
    return recent, [sum(column) for column in zip(*older_rows)]


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

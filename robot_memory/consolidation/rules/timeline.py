"""Per-key event-time timeline: outcome counts per time bucket.

State layout: state["timeline"] = {"bucket_s": w, "ancient": [c0, c1, ...],
"first": first bucket (null while empty), "gaps": [[gap, times], ...],
"columns": [[c0 of each bucket], [c1 ...], ...]}. The buckets are kept in ascending
order: the first one, then the gaps to the next as runs (hourly buckets of a busy day
are "[[1, 23]]"); each column holds the counts of every bucket, or is [] when they are
all 0. A state is a few short lists of small integers: cheap to decode, to add to and to
encode again. Column meaning is up to the rule (e.g. successes, failures, safety
failures). Buckets far behind the newest (the last) are folded into "ancient"; because
the newest bucket only grows, the fold is the same whatever the pass boundaries.

States stored before this layout ({"buckets": {"<bucket>": [c0, c1, ...]}, "newest",
"oldest"}) are read as well; the next merge rewrites them in this layout.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from itertools import groupby
from operator import mul, sub
from typing import Any

from robot_memory.consolidation.rules.base import ConsolidationConfigError, RulesConfig

# The stored layout of a timeline (1: a dict of buckets; 2: runs of gaps and columns).
# States of an older layout are read and rewritten; the benchmarks' cached stores are
# named by it.
TIMELINE_LAYOUT = 2


# A pass's per-bucket counts (the partial timelines it adds up from GROUP BY rows) keep
# the counts of one bucket packed into one int, column c at bit COLUMN_BITS * c: about
# half the memory of a list of ints, for the 10^5 buckets of a pass over 10^6 events.
# Exact: a count stays below 2^63 (events have 64-bit ids).
COLUMN_BITS = 64
_COLUMN_MASK = (1 << COLUMN_BITS) - 1


def packed(column: int, count: int) -> int:
    """`count` events in `column`, as a packed row to add to a bucket's."""
    return count << (COLUMN_BITS * column)


def unpacked(row: int, width: int) -> list[int]:
    return [(row >> (COLUMN_BITS * column)) & _COLUMN_MASK for column in range(width)]


def _check_width(timeline: dict[str, Any], config: RulesConfig) -> None:
    if timeline["bucket_s"] != config.time_bucket_s:
        raise ConsolidationConfigError(
            f"state was built with time_bucket_s={timeline['bucket_s']}, config says "
            f"{config.time_bucket_s}; rebuild the facts with `robot-memory replay`")


def _keys(first: int | None, gaps: list[list[int]]) -> list[int]:
    """The bucket numbers, ascending."""
    if first is None:
        return []
    keys = [first]
    for gap, times in gaps:
        last = keys[-1]
        keys += range(last + gap, last + gap * times + 1, gap)
    return keys


def _runs(keys: list[int]) -> list[list[int]]:
    """The gaps between ascending bucket numbers, as [gap, times] runs."""
    return [[gap, len(list(run))] for gap, run in groupby(map(sub, keys[1:], keys))]


def _laid_out(keys: list[int], columns: list[list[int]], ancient: list[int],
              bucket_s: float) -> dict[str, Any]:
    return {"bucket_s": bucket_s, "ancient": ancient, "first": keys[0] if keys else None,
            "gaps": _runs(keys), "columns": [column if any(column) else []
                                             for column in columns]}


def _from_layout_1(timeline: dict[str, Any]) -> dict[str, Any]:
    """A timeline stored as {"buckets": {"<bucket>": row}, ...} in the current layout."""
    keyed = sorted((int(bucket), row) for bucket, row in timeline["buckets"].items())
    width = len(timeline["ancient"])
    columns = [list(column) for column in zip(*[row for _, row in keyed])] if keyed else \
        [[] for _ in range(width)]
    return _laid_out([bucket for bucket, _ in keyed], columns, timeline["ancient"],
                     timeline["bucket_s"])


def _timeline_of(state: dict[str, Any], width: int, config: RulesConfig) -> dict[str, Any]:
    """The state's timeline in the current layout, made empty on first use;
    ConsolidationConfigError when it was built with another time_bucket_s (its buckets
    would not line up)."""
    timeline = state.get("timeline")
    if timeline is None:
        timeline = state["timeline"] = {"bucket_s": config.time_bucket_s,
                                        "ancient": [0] * width, "first": None, "gaps": [],
                                        "columns": [[] for _ in range(width)]}
        return timeline
    _check_width(timeline, config)
    if "buckets" in timeline:  # stored in layout 1: rewritten in this one
        timeline = state["timeline"] = _from_layout_1(timeline)
    return timeline


def timeline_add(state: dict[str, Any], stamp_ns: int, column: int, width: int,
                 config: RulesConfig) -> None:
    """One event's outcome: timeline_merge of a count of 1 (what timeline_merge is held
    to, once per counted event, by the tests and their per-record reference engine)."""
    timeline_merge(state, {config.bucket(stamp_ns): packed(column, 1)}, width, config)


def signed_unpacked(row: int, width: int) -> list[int]:
    """`unpacked` of a row whose counts may be negative (an amended attempt's outcome
    taken back: rows are sums of count << (COLUMN_BITS * column), each count below 2^63
    in size): each column's count read as a signed number and taken off before the next."""
    counts = []
    for _ in range(width):
        count = row & _COLUMN_MASK
        if count >> (COLUMN_BITS - 1):
            count -= 1 << COLUMN_BITS
        counts.append(count)
        row = (row - count) >> COLUMN_BITS
    return counts


def timeline_merge(state: dict[str, Any], packed_counts: dict[int, int], width: int,
                   config: RulesConfig, signed: bool = False) -> None:
    """Add per-bucket counts (from a GROUP BY; bucket -> packed row) to the timeline:
    the same state as timeline_add once per counted event, in any order (the horizon
    fold depends only on the newest bucket, which only grows). With `signed`, counts may
    be negative (amendments: docs/consolidation.md#amendments): the rows are read as
    signed numbers and a bucket whose counts all come to 0 is dropped."""
    timeline = _timeline_of(state, width, config)
    if not packed_counts or (not signed and (
            _merged_at_the_end(timeline, packed_counts, config)
            or _merged_into_empty(timeline, packed_counts, width, config))):
        return
    read = signed_unpacked if signed else unpacked
    counts = {bucket: read(row, width) for bucket, row in packed_counts.items()}
    keys = _keys(timeline["first"], timeline["gaps"])
    columns = [column or [0] * len(keys) for column in timeline["columns"]]
    ancient = timeline["ancient"]
    newest = max(counts) if not keys else max(keys[-1], max(counts))
    oldest_kept = newest - config.horizon_buckets()
    for bucket in sorted(counts):
        row = counts[bucket]
        if bucket < oldest_kept:
            for i, count in enumerate(row):
                ancient[i] += count
            continue
        at = len(keys) if not keys or bucket > keys[-1] else bisect_left(keys, bucket)
        if at < len(keys) and keys[at] == bucket:
            for into, count in zip(columns, row):
                into[at] += count
        else:
            keys.insert(at, bucket)
            for into, count in zip(columns, row):
                into.insert(at, count)
    if keys and keys[0] < oldest_kept:  # the newest moved on: fold what fell behind
        cut = bisect_left(keys, oldest_kept)
        for i, into in enumerate(columns):
            ancient[i] += sum(into[:cut])
            del into[:cut]
        del keys[:cut]
    if signed:  # buckets an amendment emptied: as if never counted
        kept = [at for at in range(len(keys)) if any(column[at] for column in columns)]
        if len(kept) != len(keys):
            keys = [keys[at] for at in kept]
            columns = [[column[at] for at in kept] for column in columns]
    state["timeline"] = _laid_out(keys, columns, ancient, timeline["bucket_s"])


def new_timeline(packed_counts: dict[int, int], width: int, config: RulesConfig,
                 signed: bool = False) -> dict[str, Any]:
    """The timeline timeline_merge makes of these counts in an empty state (what a pass
    does for every new group, and for every parameter band of rules v2.0), laid out
    directly when nothing falls behind the horizon (and no count is negative)."""
    keys = sorted(packed_counts)
    if not signed and keys and keys[0] >= keys[-1] - config.horizon_buckets():
        rows = [packed_counts[bucket] for bucket in keys]
        columns = [[(row >> (COLUMN_BITS * column)) & _COLUMN_MASK for row in rows]
                   for column in range(width)]
        return {"bucket_s": config.time_bucket_s, "ancient": [0] * width, "first": keys[0],
                "gaps": _runs(keys), "columns": [column if any(column) else []
                                                 for column in columns]}
    holder: dict[str, Any] = {}
    timeline_merge(holder, packed_counts, width, config, signed)
    return holder["timeline"]


def _merged_into_empty(timeline: dict[str, Any], counts: dict[int, int], width: int,
                       config: RulesConfig) -> bool:
    """A group's first counts (every group of a full pass), laid out at once: the buckets
    sorted, each column unpacked from the packed rows in one sweep. False (nothing done)
    when the timeline has buckets already or some counts fall behind the horizon."""
    if timeline["first"] is not None:
        return False
    keys = sorted(counts)
    if keys[0] < keys[-1] - config.horizon_buckets():
        return False
    rows = [counts[bucket] for bucket in keys]
    columns = [[(row >> (COLUMN_BITS * column)) & _COLUMN_MASK for row in rows]
               for column in range(width)]
    timeline["first"], timeline["gaps"] = keys[0], _runs(keys)
    timeline["columns"] = [column if any(column) else [] for column in columns]
    return True


def _merged_at_the_end(timeline: dict[str, Any], counts: dict[int, int],
                       config: RulesConfig) -> bool:
    """The common case, done in place: new events fall in the last bucket or after it,
    and nothing falls behind the horizon. False (nothing done) otherwise. The rows stay
    packed (bucket -> packed row): each nonzero column count is taken off in turn."""
    first, gaps = timeline["first"], timeline["gaps"]
    if first is None:
        return False
    last, size = first, 1
    for gap, times in gaps:
        last += gap * times
        size += times
    if min(counts) < last or first < max(counts) - config.horizon_buckets():
        return False
    columns = timeline["columns"]
    for bucket in sorted(counts):
        if bucket > last:
            if gaps and gaps[-1][0] == bucket - last:
                gaps[-1][1] += 1
            else:
                gaps.append([bucket - last, 1])
            last = bucket
            size += 1
            for column in columns:
                if column:
                    column.append(0)
        row, i = counts[bucket], 0
        while row:
            count = row & _COLUMN_MASK
            if count:
                column = columns[i]
                if not column:  # all 0 so far: written out
                    column += [0] * size
                column[-1] += count
            row >>= COLUMN_BITS
            i += 1
    return True


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


# What a timeline's buckets mean for decay and the contradiction test depends only on
# the gaps between them (their ages behind the newest) and the config. The groups of a
# pass mostly share them (the same recent hours), so each combination of a few runs is
# worked out once: the weight of every bucket per half-life, and where the recent ones
# start.
_VIEWS: dict[tuple, tuple[dict[float, list[float]], int]] = {}
_VIEWS_KEPT = 512  # combinations kept (a few KB each); the cache starts afresh beyond this
_VIEW_RUNS_KEPT = 64  # timelines of more runs are worked out each time (from _WEIGHTS)


def _view(runs: tuple[tuple[int, int], ...], width: float, window: int,
          half_lives_s: tuple[float, ...]) -> tuple[dict[float, list[float]], int]:
    """(half-life -> weight of each bucket, index of the first recent bucket) of buckets
    this far apart (runs of [gap, times]), oldest first."""
    cache_key = (runs, width, window, half_lives_s)
    view = _VIEWS.get(cache_key)
    if view is None:
        keys = _keys(0, runs)
        ages = [keys[-1] - key for key in keys]
        view = ({half_life: _weights(width, half_life, ages) for half_life in half_lives_s},
                bisect_left(keys, keys[-1] - window + 1))
        if len(runs) <= _VIEW_RUNS_KEPT:
            if len(_VIEWS) >= _VIEWS_KEPT:
                _VIEWS.clear()
            _VIEWS[cache_key] = view
    return view


def timeline_view(gaps: list[list[int]], half_lives_s: tuple[float, ...],
                  config: RulesConfig) -> tuple[dict[float, list[float]], int]:
    """(half-life -> weight of each bucket, index of the first recent bucket) of a
    timeline (current layout, not empty) with these gaps."""
    return _view(tuple(map(tuple, gaps)), config.time_bucket_s, config.recent_window_buckets,
                 half_lives_s)


def _decayed(timeline: dict[str, Any], half_lives_s: list[float], config: RulesConfig
             ) -> tuple[list[float], int]:
    """decayed_totals of a timeline (current layout, not empty), and the index of its
    first recent bucket."""
    weights_of, first_recent = timeline_view(timeline["gaps"], tuple(half_lives_s), config)
    # fsum over exact integer counts times fixed weights: independent of order (a zero
    # count adds an exact 0.0, an all-zero column is [] and totals to fsum([]) == 0.0).
    return [math.fsum(map(mul, column, weights_of[half_life])) if column else 0.0
            for half_life, column in zip(half_lives_s, timeline["columns"])], first_recent


def _stored_timeline(state: dict[str, Any]) -> dict[str, Any]:
    """The state's timeline in the current layout, for reading: one stored in layout 1 is
    converted, not rewritten (a merge rewrites it)."""
    timeline = state["timeline"]
    return _from_layout_1(timeline) if "buckets" in timeline else timeline


def timeline_totals(state: dict[str, Any], half_lives_s: list[float], config: RulesConfig
                    ) -> tuple[list[float], list[int], list[int]]:
    """decayed_totals and recent_and_older in one walk over the columns."""
    timeline = _stored_timeline(state)
    columns, ancient = timeline["columns"], timeline["ancient"]
    if timeline["first"] is None:
        return [0.0 for _ in zip(half_lives_s, columns)], [0] * len(ancient), list(ancient)
    totals, first_recent = _decayed(timeline, half_lives_s, config)
    # Integer column sums: exact in any order.
    recent = [sum(column[first_recent:]) for column in columns]
    older = [old + sum(column[:first_recent]) for old, column in zip(ancient, columns)]
    return totals, recent, older


def decayed_totals(state: dict[str, Any], half_lives_s: list[float],
                   config: RulesConfig) -> list[float]:
    """Sum of each column weighted by 2^(-age / half_life), age in event time from the
    newest bucket. fsum over exact integer counts: independent of order. (Without the
    window counts of timeline_totals: interaction_pattern needs only this.)"""
    timeline = _stored_timeline(state)
    if timeline["first"] is None:
        return [0.0 for _ in zip(half_lives_s, timeline["columns"])]
    return _decayed(timeline, half_lives_s, config)[0]


def recent_and_older(state: dict[str, Any], config: RulesConfig) -> tuple[list[int], list[int]]:
    """Raw counts per column inside the recent window and before it (ancient included)."""
    _, recent, older = timeline_totals(state, [], config)
    return recent, older

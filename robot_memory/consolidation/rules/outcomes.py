"""Outcome timelines shared by the rate rules (skill_success_rate, zone_risk):
columns 0 = successes, 1 = ordinary failures, 2 = safety-relevant failures."""

from __future__ import annotations

from typing import Any

from robot_memory.consolidation.rules.base import RulesConfig, r6
from robot_memory.consolidation.rules.timeline import (COLUMN_BITS, decayed_totals,
                                                       recent_and_older, timeline_merge,
                                                       timeline_totals)
from robot_memory.consolidation.stats import two_proportion_z, wilson_confidence

SUCCESS, FAILURE, SAFETY_FAILURE = 0, 1, 2


def add_counts(part: dict[str, Any], bucket: int, column: int, count: int) -> None:
    """Add `count` to one column of the bucket of a partial's timeline (part["buckets"],
    rows packed: see timeline.packed); a count below 1 (an amended attempt's outcome
    taken back, or moves that add up to nothing) marks the partial `signed`, for
    merge_timeline: its buckets may add up to 0, to be dropped."""
    buckets = part["buckets"]
    buckets[bucket] = buckets.get(bucket, 0) + (count << (COLUMN_BITS * column))
    if count <= 0:
        part["signed"] = True


def merge_timeline(state: dict[str, Any], partial: dict[str, Any], width: int,
                   config: RulesConfig) -> None:
    """timeline_merge of a partial's timeline (part["buckets"]), as signed counts when
    some were negative."""
    timeline_merge(state, partial["buckets"], width, config, partial.get("signed", False))


_SHIFTS = tuple(COLUMN_BITS * column for column in (SUCCESS, FAILURE, SAFETY_FAILURE))


def note_outcome_row(part: dict[str, Any], success: int, failure_reason: str, bucket: int,
                     count: int, max_id: int, max_stamp: int, config: RulesConfig) -> None:
    """What every rate rule notes for one GROUP BY row: its outcome counts in the time
    bucket, and the newest event that supports the group. Run by two rules for every
    row of a range, so written out: helper calls and max() cost a fifth more."""
    column = SUCCESS if success else (
        SAFETY_FAILURE if failure_reason in config.safety_failure_reasons else FAILURE)
    buckets = part["buckets"]  # rows packed (timeline.packed)
    buckets[bucket] = buckets.get(bucket, 0) + (count << _SHIFTS[column])
    if count <= 0:  # an amended attempt's outcome taken back: merged as signed counts
        part["signed"] = True
    if max_id > part["last_event_id"]:
        part["last_event_id"] = max_id
    if max_stamp > part["last_stamp_ns"]:
        part["last_stamp_ns"] = max_stamp


def _weighted(totals: list[float]) -> dict[str, float]:
    successes, failures, safety = totals
    return {"n": successes + failures + safety, "successes": successes,
            "failures": failures + safety}


def _half_lives(config: RulesConfig) -> tuple[float, float, float]:
    """Successes and ordinary failures fade with half_life_s, safety failures with the
    longer safety_half_life_s."""
    return config.half_life_s, config.half_life_s, config.safety_half_life_s


def weighted_outcomes(state: dict[str, Any], config: RulesConfig) -> dict[str, float]:
    """Decay-weighted counts (see _half_lives)."""
    return _weighted(decayed_totals(state, _half_lives(config), config))


def _contradiction(recent: list[int], older: list[int], config: RulesConfig
                   ) -> dict[str, Any]:
    n_recent, n_older = sum(recent), sum(older)
    z = two_proportion_z(recent[SUCCESS], n_recent, older[SUCCESS], n_older)
    least = config.contest_min_observations
    enough = n_recent >= least and n_older >= least  # (min() costs more than the test)
    return {"recent": {"n": n_recent, "successes": recent[SUCCESS]},
            "older": {"n": n_older, "successes": older[SUCCESS]},
            "z": r6(z), "contested": enough and abs(z) >= config.contest_z}


def contradiction(state: dict[str, Any], config: RulesConfig) -> dict[str, Any]:
    """Does the recent success rate disagree with the older one? Two-proportion z test on
    raw counts of the recent window vs. everything before it (documented in
    docs/consolidation.md)."""
    return _contradiction(*recent_and_older(state, config), config)


def _rate_block(successes: float, n: float) -> tuple[dict[str, Any], float]:
    confidence = wilson_confidence(successes, n)
    block = {"n": r6(n), "successes": r6(successes),
             "rate": r6(successes / n) if n else 0.0}
    return block, confidence


def rate_block(state: dict[str, Any], config: RulesConfig) -> tuple[dict[str, Any], float]:
    """The decay-weighted view of a rate and its confidence."""
    weighted = weighted_outcomes(state, config)
    return _rate_block(weighted["successes"], weighted["n"])


def rate_view(state: dict[str, Any], config: RulesConfig
              ) -> tuple[dict[str, Any], float, dict[str, Any]]:
    """rate_block and contradiction from one walk over the timeline (what render needs).
    The weighted n is _weighted's, added in the same order (the same bits)."""
    (successes, failures, safety), recent, older = timeline_totals(
        state, _half_lives(config), config)
    block, confidence = _rate_block(successes, successes + failures + safety)
    return block, confidence, _contradiction(recent, older, config)


def merge_outcomes(state: dict[str, Any], partial: dict[str, Any], config: RulesConfig) -> None:
    merge_timeline(state, partial, 3, config)

"""Outcome timelines shared by the rate rules (skill_success_rate, zone_risk):
columns 0 = successes, 1 = ordinary failures, 2 = safety-relevant failures."""

from __future__ import annotations

from math import fsum
from operator import mul
from typing import Any

from robot_memory.consolidation.rules.base import RulesConfig, r6
from robot_memory.consolidation.rules.timeline import (COLUMN_BITS, decayed_totals,
                                                       recent_and_older, timeline_add,
                                                       timeline_merge, timeline_totals,
                                                       timeline_view)
from robot_memory.consolidation.stats import two_proportion_z, wilson_confidence
from robot_memory.records import ExecutionRecord

SUCCESS, FAILURE, SAFETY_FAILURE = 0, 1, 2


def outcome_column(record: ExecutionRecord, config: RulesConfig) -> int:
    if record.success:
        return SUCCESS
    return SAFETY_FAILURE if record.failure_reason in config.safety_failure_reasons else FAILURE


def add_counts(buckets: dict[int, int], bucket: int, column: int, count: int) -> None:
    """Add `count` to one column of a partial timeline's bucket (rows packed: see
    timeline.packed)."""
    buckets[bucket] = buckets.get(bucket, 0) + (count << (COLUMN_BITS * column))


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
    if max_id > part["last_event_id"]:
        part["last_event_id"] = max_id
    if max_stamp > part["last_stamp_ns"]:
        part["last_stamp_ns"] = max_stamp


def add_outcome(state: dict[str, Any], record: ExecutionRecord, config: RulesConfig) -> None:
    timeline_add(state, record.stamp_ns, outcome_column(record, config), 3, config)


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
    enough = min(n_recent, n_older) >= config.contest_min_observations
    return {"recent": {"n": n_recent, "successes": recent[SUCCESS]},
            "older": {"n": n_older, "successes": older[SUCCESS]},
            "z": r6(z), "contested": enough and abs(z) >= config.contest_z}


def contradiction(state: dict[str, Any], config: RulesConfig) -> dict[str, Any]:
    """Does the recent success rate disagree with the older one? Two-proportion z test on
    raw counts of the recent window vs. everything before it (documented in README)."""
    return _contradiction(*recent_and_older(state, config), config)


def _rate_block(weighted: dict[str, float]) -> tuple[dict[str, Any], float]:
    confidence = wilson_confidence(weighted["successes"], weighted["n"])
    block = {"n": r6(weighted["n"]), "successes": r6(weighted["successes"]),
             "rate": r6(weighted["successes"] / weighted["n"]) if weighted["n"] else 0.0}
    return block, confidence


def rate_block(state: dict[str, Any], config: RulesConfig) -> tuple[dict[str, Any], float]:
    """The decay-weighted view of a rate and its confidence."""
    return _rate_block(weighted_outcomes(state, config))


def rate_view(state: dict[str, Any], config: RulesConfig
              ) -> tuple[dict[str, Any], float, dict[str, Any]]:
    """rate_block and contradiction from one walk over the timeline (what render needs).
    The same arithmetic as _weighted, _rate_block and _contradiction (and as
    timeline_totals), written out: it runs for every rate group a pass touches."""
    timeline = state["timeline"]
    if "buckets" in timeline or timeline["first"] is None:
        (successes, failures, safety), recent, older = timeline_totals(
            state, _half_lives(config), config)
        n_recent, n_older = sum(recent), sum(older)
        recent_successes, older_successes = recent[SUCCESS], older[SUCCESS]
    else:
        half_life, safety_half_life = config.half_life_s, config.safety_half_life_s
        weights_of, first = timeline_view(timeline["gaps"], (half_life, half_life,
                                                            safety_half_life), config)
        weights, safety_weights = weights_of[half_life], weights_of[safety_half_life]
        column_s, column_f, column_x = timeline["columns"]
        successes = fsum(map(mul, column_s, weights))
        failures = fsum(map(mul, column_f, weights))
        safety = fsum(map(mul, column_x, safety_weights))
        ancient_s, ancient_f, ancient_x = timeline["ancient"]
        recent_successes = sum(column_s[first:])
        older_successes = ancient_s + sum(column_s[:first])
        n_recent = recent_successes + sum(column_f[first:]) + sum(column_x[first:])
        n_older = (older_successes + ancient_f + ancient_x + sum(column_f[:first])
                   + sum(column_x[:first]))
    n = successes + failures + safety
    block = {"n": round(n, 6), "successes": round(successes, 6),
             "rate": round(successes / n, 6) if n else 0.0}
    z = two_proportion_z(recent_successes, n_recent, older_successes, n_older)
    conflict = {"recent": {"n": n_recent, "successes": recent_successes},
                "older": {"n": n_older, "successes": older_successes}, "z": round(z, 6),
                "contested": (min(n_recent, n_older) >= config.contest_min_observations
                              and abs(z) >= config.contest_z)}
    return block, wilson_confidence(successes, n), conflict


def merge_outcomes(state: dict[str, Any], partial: dict[str, Any], config: RulesConfig) -> None:
    timeline_merge(state, partial["buckets"], 3, config)

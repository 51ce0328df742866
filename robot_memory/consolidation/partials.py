"""Aggregated execution results added up by the rules into partial states.

A rule writes its aggregation once, as the set-based methods a pass calls (`add_outcome`,
`add_values`). A pass adds up a whole range this way; `explain` adds up one result at a
time the same way (a range that holds just that result), so no rule needs a per-record
path of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from robot_memory.consolidation.rules import Partials, Rule, RulesConfig
from robot_memory.store import AMENDMENT, ResultAggregates, one_result_aggregates


class Aggregated(NamedTuple):
    """A range's results added up: every rule's partial states, and what the range held."""

    partials: Partials
    events_read: int  # results in the range
    first_seq: int  # the smallest chain position among them (0: none)
    last_stamp_ns: int  # the newest stamp among them (0: none)


def aggregate(aggregates: ResultAggregates, config: RulesConfig, rules: Sequence[Rule]
              ) -> Aggregated:
    """Partial states of every rule, and the range's count, first seq and newest stamp.
    The outcome rows stream past once (10^5 of them at 10^6 events), never held."""
    partials = Partials()
    events_read, first_seq, last_stamp = 0, 0, 0
    add_outcomes = [rule.add_outcome for rule in rules]
    for row in aggregates.outcomes:
        count = row.count
        events_read += count
        if not first_seq or row.min_seq < first_seq:
            first_seq = row.min_seq
        if row.max_stamp_ns > last_stamp:
            last_stamp = row.max_stamp_ns
        if row.invalid_reason is not None:
            if row.invalid_reason == AMENDMENT:  # counted by disposition (the pass)
                continue
            partials.skip(f"invalid_payload:{row.invalid_reason}", count)
        for add_outcome in add_outcomes:
            add_outcome(row, config, partials)
    # What amendments change (store/amendments.py): signed counts under their attempts'
    # original fields, added by the same methods, read as no results of their own.
    for row in aggregates.amended:
        for add_outcome in add_outcomes:
            add_outcome(row, config, partials)
    for batch in aggregates.values:
        for rule in rules:
            rule.add_values(batch, config, partials)
    for batch in aggregates.amended_values:
        for rule in rules:
            rule.add_values(batch, config, partials)
    if aggregates.amended:  # a skip an amendment moved and moved back is no skip
        partials.skipped = {reason: n for reason, n in partials.skipped.items() if n}
    return Aggregated(partials, events_read, first_seq, last_stamp)


def partials_of_result(rules: Sequence[Rule], payload: dict[str, Any], stamp_ns: int,
                       event_id: int, config: RulesConfig) -> Partials:
    """The partial states (and skips) a pass would add up from a range holding only this
    execution result (its payload as stored)."""
    one = one_result_aggregates(payload, stamp_ns, event_id, int(config.time_bucket_s * 1e9),
                                int(config.band_bucket_s * 1e9))
    return aggregate(one, config, rules).partials


def fact_keys_of_result(rule: Rule, payload: dict[str, Any], stamp_ns: int, event_id: int,
                        config: RulesConfig) -> set[str]:
    """The keys of the facts of `rule` that this execution result supports: those the
    rule renders from the partial states the result alone makes."""
    groups = partials_of_result((rule,), payload, stamp_ns, event_id,
                                config).groups.get(rule.kind, {})
    return {key for group, partial in groups.items() for key in rule.fact_keys(group, partial)}

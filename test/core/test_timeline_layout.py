"""The stored timeline (runs of gaps, one list of counts per column) against its
definition: whatever the order of the events and however they are cut into passes
(JSON between them), the kept buckets are those within the horizon of the newest one,
everything older is in 'ancient', and the stored bytes are the same. States stored in
the earlier layout (a dict of buckets) are read and rewritten without changing a fact."""

import json
import random
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import result_event
from robot_memory.canonical import canonical_json
from robot_memory.consolidation import RulesConfig, consolidation_pass, facts_snapshot
from robot_memory.consolidation.consolidation_pass import replay_snapshot
from robot_memory.consolidation.rules.timeline import (_keys, decayed_totals, packed,
                                                       recent_and_older, timeline_add,
                                                       timeline_merge, unpacked)
from robot_memory.store import MemoryStore

# Buckets of 10 s, a horizon of 40 buckets: streams below span 60 of them.
CONFIG = RulesConfig(time_bucket_s=10.0, half_life_s=30.0, safety_half_life_s=10.0,
                     recent_window_s=50.0)
WIDTH = 3
HALF_LIVES = [30.0, 30.0, 10.0]
IDENT = "d" * 64

events = st.lists(st.tuples(st.integers(-5, 55), st.integers(0, WIDTH - 1)), max_size=60)


def by_definition(items: list[tuple[int, int]]) -> tuple[list[int], list[list[int]], list[int]]:
    """(kept buckets, their counts per column, ancient) straight from the events."""
    if not items:
        return [], [[] for _ in range(WIDTH)], [0] * WIDTH
    oldest_kept = max(bucket for bucket, _ in items) - CONFIG.horizon_buckets()
    rows: dict[int, list[int]] = {}
    ancient = [0] * WIDTH
    for bucket, column in items:
        row = ancient if bucket < oldest_kept else rows.setdefault(bucket, [0] * WIDTH)
        row[column] += 1
    keys = sorted(rows)
    return keys, [[rows[k][c] for k in keys] for c in range(WIDTH)], ancient


def stored(state: dict) -> tuple[list[int], list[list[int]], list[int]]:
    """(buckets, counts per column with no column left out, ancient) of a stored state."""
    timeline = state["timeline"]
    keys = _keys(timeline["first"], timeline["gaps"])
    return keys, [column or [0] * len(keys) for column in timeline["columns"]], \
        timeline["ancient"]


def in_passes(items, cuts: set[int], grouped: bool) -> str:
    """The state after merging the events pass by pass (a JSON round trip between),
    each pass's events grouped by bucket (as a pass's GROUP BY) or added one by one."""
    text = "{}"
    bounds = sorted({0, len(items), *(c for c in cuts if c < len(items))})
    for start, end in zip(bounds, bounds[1:]):
        state = json.loads(text)
        if grouped:
            counts: dict[int, int] = {}
            for bucket, column in items[start:end]:
                counts[bucket] = counts.get(bucket, 0) + packed(column, 1)
            timeline_merge(state, counts, WIDTH, CONFIG)
        else:
            for bucket, column in items[start:end]:
                timeline_add(state, bucket * 10 * 10**9, column, WIDTH, CONFIG)
        text = canonical_json(state)
    return text


def layout_1(timeline: dict) -> dict:
    """The same timeline as the earlier layout stored it."""
    keys = _keys(timeline["first"], timeline["gaps"])
    columns = [column or [0] * len(keys) for column in timeline["columns"]]
    rows = {str(k): [column[i] for column in columns] for i, k in enumerate(keys)}
    return {"bucket_s": timeline["bucket_s"], "ancient": list(timeline["ancient"]),
            "buckets": rows, "newest": max(keys, default=None),
            "oldest": min(keys, default=None)}


def in_layout_1(value):
    """A state with every timeline in it (at any depth) in the earlier layout."""
    if isinstance(value, dict):
        return {k: layout_1(v) if k == "timeline" else in_layout_1(v) for k, v in value.items()}
    return value


@settings(max_examples=150, deadline=None)
@given(items=events, cuts=st.sets(st.integers(0, 60), max_size=5), seed=st.integers(0, 99))
def test_any_order_and_cut_gives_the_timeline_of_the_definition(items, cuts, seed):
    expected = in_passes(items, set(), grouped=True)
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    for order, at, grouped in ((items, cuts, True), (shuffled, cuts, True),
                               (shuffled, cuts, False)):
        assert in_passes(order, at, grouped) == expected
    if items:
        assert stored(json.loads(expected)) == by_definition(items)


@settings(max_examples=100, deadline=None)
@given(items=events.filter(bool), more=events, cut=st.integers(0, 60))
def test_a_state_of_the_earlier_layout_reads_and_merges_the_same(items, more, cut):
    state = json.loads(in_passes(items, set(), grouped=True))
    old = in_layout_1(state)
    assert decayed_totals(old, HALF_LIVES, CONFIG) == decayed_totals(state, HALF_LIVES, CONFIG)
    assert recent_and_older(old, CONFIG) == recent_and_older(state, CONFIG)
    assert "buckets" in old["timeline"]  # reading did not rewrite it
    counts: dict[int, int] = {}
    for bucket, column in more:
        counts[bucket] = counts.get(bucket, 0) + packed(column, 1)
    timeline_merge(old, counts, WIDTH, CONFIG)
    timeline_merge(state, counts, WIDTH, CONFIG)
    assert canonical_json(old) == canonical_json(state)
    assert stored(state) == by_definition(items + more)


def test_a_store_holding_states_of_the_earlier_layout_gives_the_same_facts(tmp_path):
    """Stores consolidated before the layout changed: their states are read, and the
    facts of the next passes are those of a store that never held the earlier layout."""
    rng = random.Random(3)
    stream = [result_event(rng.randint(0, 400) * 10.0, success=rng.random() < 0.7,
                           force=float(rng.randint(1, 4)), target=f"t{i % 5}",
                           zone=rng.choice(["", "z1"]), observations={"mass_kg": 0.5})
              for i in range(300)]
    parts = []
    for name in ("converted", "current"):
        url = f"sqlite:///{tmp_path / name}.db"
        part = MemoryStore(url).partition(IDENT)
        part.append_many(stream[:200])
        consolidation_pass(part, CONFIG)
        parts.append((url, part))
    url, _ = parts[0]
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        for kind, key, text in conn.execute("SELECT fact_kind, fact_key, state_json FROM "
                                            "consolidation_state").fetchall():
            conn.execute("UPDATE consolidation_state SET state_json = ? WHERE fact_kind = ? "
                         "AND fact_key = ?", (canonical_json(in_layout_1(json.loads(text))),
                                              kind, key))
        assert conn.execute("SELECT count(*) FROM consolidation_state WHERE state_json "
                            "LIKE '%\"buckets\":{%'").fetchone()[0] > 0
    for _, part in parts:
        part.append_many(stream[200:])
        assert consolidation_pass(part, CONFIG).facts_touched > 0
    (_, converted), (_, current) = parts
    assert converted.facts() == current.facts()
    assert facts_snapshot(converted) == replay_snapshot(converted, CONFIG)
    with converted.store.read() as conn:
        after = converted.all_consolidation_states(conn)
    with current.store.read() as conn:
        assert after == current.all_consolidation_states(conn)  # rewritten in this layout


@pytest.mark.parametrize("config", [CONFIG, RulesConfig()])
def test_an_empty_timeline_totals_to_zero(config):
    state: dict = {}
    timeline_merge(state, {}, WIDTH, config)
    assert decayed_totals(state, HALF_LIVES, config) == [0.0, 0.0, 0.0]
    assert recent_and_older(state, config) == ([0, 0, 0], [0, 0, 0])


@given(rows=st.lists(st.lists(st.integers(0, 2**63 // 8), min_size=3, max_size=3),
                     max_size=8))
def test_packed_rows_add_up_exactly(rows):
    """A pass adds a bucket's counts as packed ints: column totals up to 2^63 (more
    events than 64-bit ids can number) add up exactly, nothing carried into the next
    column."""
    total = sum(packed(column, count) for row in rows for column, count in enumerate(row))
    assert unpacked(total, 3) == [sum(row[c] for row in rows) for c in range(3)]

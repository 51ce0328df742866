"""The set-based pass against the per-event engine it replaced (test/oracle_consolidation.py):
random streams cut into passes at random points, on SQLite and on a real PostgreSQL
server, with rollup blocks of a few events so that passes read blocks whole from the
rollups and the ends of their ranges from the result rows. Every fact row (ids and
provenance included), every consolidation state and every logged event must be the
same bytes."""

import random
import tempfile
from pathlib import Path

import oracle_consolidation
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_memory.consolidation import RulesConfig, consolidation_pass, facts_snapshot
from robot_memory.consolidation.consolidation_pass import replay_snapshot
from robot_memory.consolidation.overrides import (record_freeze, record_operator_fact,
                                                  record_reset)
from robot_memory.store import MemoryStore, NewEvent
from robot_memory.store.schema import RollupShape

IDENT = "c" * 64
# Buckets of 10 s and a horizon of 20 buckets over stamps spread across 600 s: the
# timelines fold old buckets into 'ancient' and the contradiction test has both sides.
CONFIG = RulesConfig(time_bucket_s=10.0, half_life_s=10.0, safety_half_life_s=5.0,
                     recent_window_s=30.0, contest_min_observations=2, contest_z=1.0,
                     promotion_min_observations=2)
VALUES = [0.0, -0.0, 1.5, 2, 5.0, 1e-7, 3.25, -4.0]

result = st.fixed_dictionaries({
    "skill_id": st.sampled_from(["manipulation.grasp", "manipulation.place", "nav.dock"]),
    "target_class": st.sampled_from(["", "cup", "box"]),
    "environment": st.sampled_from(["", "sim", "lab"]),
    "zone": st.sampled_from(["", "z1", "z2"]),
    "success": st.booleans(),
    "failure_reason": st.sampled_from(["", "slipped", "collision", "dropped"]),
    "parameters": st.dictionaries(st.sampled_from(["force_n", "speed"]),
                                  st.sampled_from(VALUES), max_size=2),
    "observations": st.dictionaries(st.sampled_from(["mass_kg", "width_m"]),
                                    st.sampled_from(VALUES), max_size=2),
    "stamp_s": st.integers(-30, 600),
})
# Rare items that are not plain results: an unreadable payload, or an override.
special = st.sampled_from([("invalid", {"skill_id": "", "success": True}),
                           ("invalid", {"skill_id": "x.y", "success": "yes"}),
                           ("operator_fact", None), ("freeze", None), ("unfreeze", None),
                           ("reset", None)])
item = st.one_of(result.map(lambda r: ("result", r)), result.map(lambda r: ("result", r)),
                 result.map(lambda r: ("result", r)), special)
stream = st.lists(item, max_size=40)
# Rollup shapes: the pass's 10 s buckets as the rollup's (read in key order), as two
# 5 s rollup buckets (regrouped by the database), or not a multiple (result rows only).
SHAPES = [RollupShape(block=3, bucket_ns=10 * 10**9), RollupShape(block=4, bucket_ns=5 * 10**9),
          RollupShape(block=5, bucket_ns=4 * 10**9), RollupShape()]
shapes = st.sampled_from(SHAPES)


def append_item(part, kind, body, index, scratch: Path):
    stamp = index * 10**9
    if kind == "result":
        payload = {k: v for k, v in body.items() if k != "stamp_s"}
        if payload["success"]:
            payload["failure_reason"] = ""
        part.append("execution_result", {**payload, "duration_s": 1.0, "intent_id": "",
                                         "notes": ""}, body["stamp_s"] * 10**9)
    elif kind == "invalid":
        part.append("execution_result", body, stamp)
    elif kind == "operator_fact":
        record_operator_fact(part, "ops", "measured", "skill_success_rate",
                             "manipulation.grasp + cup + sim",
                             {"skill_id": "manipulation.grasp", "target_class": "cup",
                              "environment": "sim", "rate": 0.5}, 0.9, stamp)
    elif kind in ("freeze", "unfreeze"):
        record_freeze(part, "ops", "maintenance", kind == "freeze", stamp)
    else:
        record_reset(part, "ops", "start over", stamp, scratch / f"archive_{index}.json")


def run(engine, url: str, items, cuts: set[int], scratch: Path,
        rollup: RollupShape = RollupShape()):
    """Append the items, running a pass of `engine` before each cut, and twice at the
    end (the second must change nothing); returns everything the passes wrote."""
    store = MemoryStore(url, rollup=rollup)
    part = store.partition(IDENT)
    for index, (kind, body) in enumerate(items):
        if index in cuts:
            engine(part, CONFIG)
        append_item(part, kind, body, index, scratch)
    engine(part, CONFIG)
    assert engine(part, CONFIG).facts_touched == 0
    with store.read() as conn:
        states = part.all_consolidation_states(conn)
    written = (part.facts(), states, part.head(), list(part.events()))
    snapshot = facts_snapshot(part)
    assert replay_snapshot(part, CONFIG) == snapshot
    store.close()
    return written, snapshot


def check_equivalence(new_url: str, oracle_url: str, items, cuts: set[int],
                      rollup: RollupShape):
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        new, snapshot = run(consolidation_pass, new_url, items, cuts, Path(a), rollup)
        old, _ = run(oracle_consolidation.consolidation_pass, oracle_url, items, cuts,
                     Path(b))
    facts, states, head, logged = new
    assert facts == old[0]
    assert states == old[1]
    # Archive paths differ between the two runs; everything else is the same chain.
    if not any(kind == "reset" for kind, _ in items):
        assert head == old[2]
    assert [(e.kind, e.seq, e.stamp_ns) for e in logged] == \
        [(e.kind, e.seq, e.stamp_ns) for e in old[3]]
    assert [e.payload for e in logged if e.kind != "override"] == \
        [e.payload for e in old[3] if e.kind != "override"]
    return snapshot


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=stream, cuts=st.sets(st.integers(0, 40), max_size=6), rollup=shapes)
def test_same_facts_states_and_events_as_the_per_event_engine_on_sqlite(items, cuts, rollup):
    with tempfile.TemporaryDirectory() as folder:
        check_equivalence(f"sqlite:///{folder}/new.db", f"sqlite:///{folder}/old.db",
                          items, cuts, rollup)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=stream, cuts=st.sets(st.integers(0, 40), max_size=4), rollup=shapes)
def test_same_facts_states_and_events_as_the_per_event_engine_on_postgresql(
        pg_server, items, cuts, rollup):
    check_equivalence(pg_server.new_database(), pg_server.new_database(), items, cuts,
                      rollup)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(result.map(lambda r: ("result", r)), min_size=1, max_size=40),
       cuts=st.sets(st.integers(0, 40), max_size=6), seed=st.integers(0, 1000),
       rollup=shapes)
def test_idempotent_order_and_cut_invariant(items, cuts, seed, rollup):
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    snapshots = []
    with tempfile.TemporaryDirectory() as folder:
        for name, order, at in (("one", items, set()), ("cut", items, cuts),
                                ("shuffled", shuffled, cuts)):
            snapshots.append(run(consolidation_pass, f"sqlite:///{folder}/{name}.db", order,
                                 at, Path(folder), rollup)[1])
    assert snapshots[0] == snapshots[1] == snapshots[2]


def test_a_pass_over_many_events_matches_the_per_event_engine(tmp_path):
    """A bigger stream than the property tests draw (many groups, every rule)."""
    rng = random.Random(7)
    events = []
    for i in range(3000):
        success = rng.random() < 0.7
        events.append(NewEvent("execution_result", {
            "skill_id": rng.choice(["a.grasp", "a.place"]), "target_class": f"t{i % 37}",
            "environment": f"e{i % 3}", "zone": rng.choice(["", "z1", "z2"]),
            "success": success, "failure_reason": "" if success else rng.choice(
                ["slipped", "collision"]),
            "parameters": {"force_n": float(rng.randint(1, 9))},
            "observations": {"mass_kg": rng.randint(1, 5) / 10}, "duration_s": 1.0,
            "intent_id": "", "notes": ""}, rng.randint(0, 5000) * 10**9))
    parts = []
    for name, rollup in (("new", RollupShape(block=64, bucket_ns=5 * 10**9)),
                         ("old", RollupShape())):
        part = MemoryStore(f"sqlite:///{tmp_path / name}.db", rollup=rollup).partition(IDENT)
        part.append_many(events[:2000])
        parts.append(part)
    consolidation_pass(parts[0], CONFIG)
    oracle_consolidation.consolidation_pass(parts[1], CONFIG)
    for part in parts:
        part.append_many(events[2000:])
    consolidation_pass(parts[0], CONFIG)
    oracle_consolidation.consolidation_pass(parts[1], CONFIG)
    assert parts[0].facts() == parts[1].facts()
    assert parts[0].head() == parts[1].head()

"""Rules v2.0's skill_success_rate: evidence conditional on parameter bands, regimes found
by change detection, and the rule sets by version (docs/consolidation.md#regimes).

The world of issue 48, scaled down: grasps of glass_cup at 25 N that work until new cups
crack at 25 N and work at 15 N, a planner that uses the recommended force of an active
fact at confidence >= 0.5 and otherwise explores at 15 N."""

from __future__ import annotations

import hashlib
import random
import tempfile

import oracle_consolidation
import pytest
from helpers import result_event, varied_events
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle_rules import two_significant_figures

from robot_memory.consolidation import RulesConfig, consolidation_pass, facts_snapshot
from robot_memory.consolidation.rules import ConsolidationConfigError
from robot_memory.consolidation.consolidation_pass import replay_snapshot
from robot_memory.consolidation.fact_schemas import value_problem
from robot_memory.consolidation.rules.skill_success_rate_v2 import band_of
from robot_memory.store import MemoryStore

IDENT = "a2" * 32
HOUR = 3600.0
DAY = 24 * HOUR
CONFIG = RulesConfig()
SKILL, TARGET = "manipulation.grasp", "glass_cup"
EXPLORE_N = 15.0


def skill_fact(part, env="lab"):
    return {f.key: f for f in part.facts() if f.kind == "skill_success_rate"}.get(
        f"{SKILL} + {TARGET} + {env}")


def planner_force(part, env="lab") -> float:
    """The README's planner: an active fact's recommended force at confidence >= 0.5,
    else explore."""
    fact = skill_fact(part, env)
    if fact is None or fact.status != "active" or fact.confidence < 0.5:
        return EXPLORE_N
    return fact.value["recommended_parameters"].get("force_n", {}).get("median", EXPLORE_N)


def history(days: int, env="lab", force=25.0):
    """Ten grasps a day, hourly from 8:00, 19 of 20 successful."""
    return [result_event(day * DAY + (8 + k) * HOUR, success=(day * 10 + k) % 20 != 7,
                         force=force, env=env, reason="slipped")
            for day in range(days) for k in range(10)]


def cracks_at_25(force: float) -> bool:
    return force < 20.0


@pytest.fixture
def part(tmp_path):
    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.db'}")
    yield store.partition(IDENT)
    store.close()


def attempts(part, first_day: int, days: int, works, every: int = 1, env="lab",
             config: RulesConfig = CONFIG):
    """The planner's attempts, hourly from 8:00, ten a day, a pass after every `every`;
    yields (attempt number, force, success, fact after its pass or None)."""
    number = 0
    for day in range(first_day, first_day + days):
        for k in range(10):
            force = planner_force(part, env)
            success = works(force)
            part.append_many([result_event(day * DAY + (8 + k) * HOUR, success=success,
                                           force=force, env=env, reason="cracked")])
            number += 1
            fact = None
            if number % every == 0:
                consolidation_pass(part, config)
                fact = skill_fact(part, env)
            yield number, force, success, fact


# -- the grid ---------------------------------------------------------------------------
@pytest.mark.parametrize("value, band", [(24.7, "25.0"), (0.473, "0.47"), (0.0, "0.0"),
                                         (-0.0, "0.0"), (1234.0, "1200.0"), (25.0, "25.0"),
                                         (15.0, "15.0"), (-3.14159, "-3.1"), (1e-7, "1e-07"),
                                         (24.5, "24.0"), (99.6, "100.0")])
def test_a_value_s_band_is_the_value_to_two_significant_figures(value, band):
    assert band_of(repr(value)) == band


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12))
def test_the_grid_is_the_decimal_rounding_of_the_exact_value(value):
    assert band_of(repr(value)) == two_significant_figures(value)


# -- the step change of issue 48 -----------------------------------------------------------
def test_a_step_change_gives_one_boundary_and_the_working_band_is_recommended(part):
    config = CONFIG
    part.append_many(history(20))
    consolidation_pass(part)
    before = skill_fact(part)
    assert before.status == "active" and before.value["rule_version"] == "v2.0"
    assert before.value["recommended_parameters"]["force_n"]["median"] == 25.0
    assert before.value["regime"]["changes"] == 0 and before.value["change_suspected"] is None
    failures, served_at = 0, None
    for number, force, success, fact in attempts(part, 20, 10, cracks_at_25):
        failures += not success
        band_15 = {row["band"]: row for row in fact.value["parameter_evidence"]["force_n"]}
        if served_at is None and band_15.get("15.0", {}).get("successes", 0) >= \
                config.contest_min_observations and fact.value["regime"]["changes"]:
            served_at = number  # the pass once 15 N has that many successes
            assert fact.status == "active"
            assert fact.value["recommended_parameters"]["force_n"]["median"] == 15.0
    assert failures <= config.contest_min_observations + 3
    assert served_at is not None
    after = skill_fact(part)
    regime = after.value["regime"]
    assert regime["changes"] == 1  # one change, one boundary
    # The new regime starts where the excursion began: the band bucket (band_bucket_s,
    # a day) of the first cracked cup.
    assert regime["since_ns"] == int(20 * DAY * 1e9)
    assert regime["test"]["band"] == "25.0" and regime["test"]["direction"] == "down"
    assert regime["test"]["statistic"] >= config.change_threshold
    previous = {row["band"]: row for row in regime["previous"]["parameter_evidence"]["force_n"]}
    assert previous["25.0"]["n"] == 200 and previous["25.0"]["successes"] == 190
    assert after.status == "active" and after.confidence >= 0.5
    assert after.value["recommended_parameters"]["force_n"]["median"] == 15.0
    assert after.value["rate"] == 1.0 and after.value["n"] == after.value["successes"]
    assert value_problem(after.kind, after.value) is None
    assert replay_snapshot(part) == facts_snapshot(part)


def test_while_a_change_is_suspected_the_fact_is_contested_not_the_old_answer(part):
    part.append_many(history(20))
    consolidation_pass(part)
    part.append_many([result_event(20 * DAY + (8 + k) * HOUR, success=False, force=25.0,
                                   env="lab", reason="cracked") for k in range(3)])
    consolidation_pass(part)
    fact = skill_fact(part)
    assert fact.status == "contested"
    assert fact.value["change_suspected"]["band"] == "25.0"
    assert fact.value["regime"]["changes"] == 0
    assert planner_force(part) == EXPLORE_N


# -- a burst is not a regime -----------------------------------------------------------------
def test_an_hour_of_failures_is_suspected_but_is_not_a_new_regime(part):
    config = CONFIG
    part.append_many(history(20))
    # An hour of wet floor: six grasps in one bucket, all dropped.
    part.append_many([result_event(20 * DAY + 8 * HOUR + k * 60, success=False, force=25.0,
                                   env="lab", reason="slipped") for k in range(6)])
    consolidation_pass(part)
    fact = skill_fact(part)
    assert fact.status == "contested" and fact.value["change_suspected"] is not None
    assert fact.value["regime"]["changes"] == 0
    # The floor dries: everything works again. Two passes a day.
    served = []
    for number, force, _, fact in attempts(part, 21, 5, lambda force: True, every=5):
        if fact is not None:
            served.append((fact.status, force))
    assert served[1] == ("active", 25.0) or served[0] == ("active", 25.0)  # a pass or two
    fact = skill_fact(part)
    assert fact.status == "active" and fact.value["regime"]["changes"] == 0
    assert fact.value["recommended_parameters"]["force_n"]["median"] == 25.0
    assert fact.value["change_suspected"] is None
    assert sum(1 for status, _ in served if status == "contested") <= 1
    assert config.change_threshold > 0


def test_a_fall_is_confirmed_once_retested_after_the_skill_worked_elsewhere(part):
    """Two days of failures at 25 N (two band buckets) reach the threshold, but two bad
    days of every force would too: the change is confirmed once 25 N fails again after
    15 N has worked."""
    config = CONFIG
    part.append_many(history(20))
    part.append_many([result_event(day * DAY + 8 * HOUR + k * 60, success=False, force=25.0,
                                   env="lab", reason="cracked")
                      for day in (20, 21) for k in range(4)])
    consolidation_pass(part)
    fact = skill_fact(part)
    assert fact.value["regime"]["changes"] == 0 and fact.status == "contested"
    assert fact.value["change_suspected"]["statistic"] >= config.change_threshold
    assert planner_force(part) == EXPLORE_N
    retests = 0
    for _, force, _, fact in attempts(part, 22, 3, cracks_at_25):
        retests += force > 20
        if fact.value["regime"]["changes"]:
            break
    assert 1 <= retests <= 3
    regime = fact.value["regime"]
    assert regime["changes"] == 1 and regime["since_ns"] == int(20 * DAY * 1e9)
    assert fact.status == "active"
    assert fact.value["recommended_parameters"]["force_n"]["median"] == 15.0


def test_a_bad_day_of_every_force_is_not_a_regime(part):
    """Every grasp fails for a day (ten, hourly), then the world is as before: 25 N is
    tried again once 15 N has worked, works, and is recommended as before."""
    part.append_many(history(20))
    part.append_many([result_event(20 * DAY + (8 + k) * HOUR, success=False, force=25.0,
                                   env="lab", reason="slipped") for k in range(10)])
    consolidation_pass(part)
    assert skill_fact(part).status == "contested"
    for _ in attempts(part, 21, 3, lambda force: True, every=5):
        pass
    fact = skill_fact(part)
    assert fact.value["regime"]["changes"] == 0 and fact.status == "active"
    assert fact.value["recommended_parameters"]["force_n"]["median"] == 25.0


# -- a slow drift is followed --------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 4])
def test_pads_that_wear_are_followed_before_long(part, seed):
    """25 N loses three points of success a day (the pads wear) while 15 N holds at 0.8;
    two passes a day. The days the planner still mostly grasps at 25 N once its rate
    fell more than change_drift below what it was (0.95) are few (a smaller fall is
    tolerated by design)."""
    rng = random.Random(seed)
    part.append_many(history(20))
    consolidation_pass(part)
    worse_days = 0
    for day in range(20, 45):
        p25 = 0.95 - 0.03 * (day - 20)
        at_25 = 0
        for _, force, _, _ in attempts(
                part, day, 1, lambda force: rng.random() < (p25 if force > 20 else 0.8),
                every=5):
            at_25 += force > 20
        worse_days += p25 < 0.95 - CONFIG.change_drift and at_25 > 5
    assert worse_days <= 7
    fact = skill_fact(part)
    assert fact.value["regime"]["changes"] >= 1
    assert fact.value["recommended_parameters"]["force_n"]["median"] == 15.0


# -- a change stays where it happened ------------------------------------------------------
def test_a_change_in_one_environment_stays_there(part):
    part.append_many(history(20, env="lab") + history(20, env="kitchen"))
    consolidation_pass(part)
    kitchen_before = skill_fact(part, "kitchen")
    for _ in attempts(part, 20, 3, cracks_at_25, env="lab"):
        pass
    assert skill_fact(part, "lab").value["regime"]["changes"] == 1
    kitchen = skill_fact(part, "kitchen")
    assert kitchen == kitchen_before
    assert kitchen.value["regime"]["changes"] == 0 and kitchen.status == "active"
    assert kitchen.value["recommended_parameters"]["force_n"]["median"] == 25.0


# -- the evidence is conditional on the parameters -------------------------------------------
def test_each_band_has_its_own_rate_and_the_best_lower_bound_wins(part):
    events = [result_event(i * 60.0, success=True, force=15.0, env="lab") for i in range(12)]
    events += [result_event(i * 60.0 + 30, success=i % 2 == 0, force=24.7, env="lab")
               for i in range(40)]
    part.append_many(events)
    consolidation_pass(part)
    fact = skill_fact(part)
    bands = {row["band"]: row for row in fact.value["parameter_evidence"]["force_n"]}
    assert (bands["15.0"]["n"], bands["15.0"]["successes"]) == (12, 12)
    assert (bands["25.0"]["n"], bands["25.0"]["successes"]) == (40, 20)  # 24.7 -> 25
    assert bands["15.0"]["rate"] == 1.0 and bands["25.0"]["rate"] == pytest.approx(0.5, 0.05)
    best = fact.value["recommended_parameters"]["force_n"]
    assert (best["median"], best["n"], best["successes"]) == (15.0, 12, 12)
    assert best["lcb"] == bands["15.0"]["lcb"] > bands["25.0"]["lcb"]
    # The top-level rate is the recommended band's, not the rate over all forces.
    assert fact.value["rate"] == 1.0 and fact.value["n"] == 12
    assert fact.n_observations == 52


def test_a_key_without_parameters_is_one_band(part):
    part.append_many([result_event(i * 60.0, success=i % 4 != 0) for i in range(8)])
    part.append_many([])
    store_events = []
    for i in range(8):
        event = result_event(1000 + i * 60.0, success=True, skill="navigation.dock",
                             target="dock_a")
        payload = {**event.payload, "parameters": {}}
        store_events.append(type(event)(event.kind, payload, event.stamp_ns))
    part.append_many(store_events)
    consolidation_pass(part)
    dock = [f for f in part.facts() if f.key == "navigation.dock + dock_a + sim_relaxed"][0]
    assert dock.value["recommended_parameters"] == {}
    assert dock.value["parameter_evidence"][""][0]["n"] == 8
    assert (dock.value["n"], dock.value["successes"], dock.status) == (8, 8, "active")


# -- any order, any cut; the same as the reference engine ---------------------------------------
def changing_world(seed: int) -> list:
    """A step change with exploration and noise, in buckets of 10 s."""
    rng = random.Random(seed)
    events = []
    for i in range(90):
        t = i * 7.0 + rng.randint(0, 5)
        force = rng.choice([15.0, 25.0, 25.0, 24.6, 31.0])
        works = (force > 20.0) if t < 300 else (force < 20.0)
        success = works if rng.random() < 0.9 else not works
        events.append(result_event(t, success=success, force=force,
                                   env=rng.choice(["lab", "lab", "kitchen"]),
                                   reason=rng.choice(["cracked", "collision"])))
    return events


SMALL = RulesConfig(time_bucket_s=10.0, band_bucket_s=30.0, half_life_s=200.0,
                    safety_half_life_s=400.0,
                    contest_min_observations=3, change_threshold=2.5,
                    promotion_min_observations=2)


def snapshot_after(engine, events, cuts, folder, name):
    store = MemoryStore(f"sqlite:///{folder}/{name}.db")
    part = store.partition(IDENT)
    start = 0
    for end in [*sorted(cuts), len(events)]:
        part.append_many(events[start:end])
        engine(part, SMALL)
        start = end
    facts, snapshot = part.facts(), facts_snapshot(part)
    assert replay_snapshot(part, SMALL) == snapshot
    store.close()
    return facts, snapshot


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), order=st.integers(0, 10_000),
       cuts=st.sets(st.integers(1, 89), max_size=5))
def test_regimes_are_the_same_under_any_order_and_cut_and_as_the_reference(seed, order, cuts):
    events = changing_world(seed)
    shuffled = events[:]
    random.Random(order).shuffle(shuffled)
    with tempfile.TemporaryDirectory() as folder:
        _, snapshot = snapshot_after(consolidation_pass, events, set(), folder, "one")
        facts, cut = snapshot_after(consolidation_pass, shuffled, cuts, folder, "cut")
        reference, _ = snapshot_after(oracle_consolidation.consolidation_pass, shuffled, cuts,
                                      folder, "reference")
    assert cut == snapshot
    assert facts == reference  # every row, ids and provenance included


def test_the_changing_world_has_regimes():
    with tempfile.TemporaryDirectory() as folder:
        facts, _ = snapshot_after(consolidation_pass, changing_world(1), set(), folder, "w")
    changes = [f.value["regime"]["changes"] for f in facts if f.kind == "skill_success_rate"]
    assert any(changes)


# -- rule sets by version ------------------------------------------------------------------
def test_a_store_keeps_the_version_its_states_were_built_with(part):
    part.append_many(history(3))
    first = consolidation_pass(part, RulesConfig(rule_version="v1.0"))
    assert first.rule_version == "v1.0" and first.upgrade_available is None
    part.append_many(history(1))
    later = consolidation_pass(part)  # configured: v2.0
    assert later.rule_version == "v1.0" and later.upgrade_available == "v2.0"
    assert "upgrade is available" in later.summary()
    fact = skill_fact(part)
    assert fact.rule_version == fact.value["rule_version"] == "v1.0"
    assert "contradiction_test" in fact.value and "regime" not in fact.value
    assert {f.rule_version for f in part.facts()} == {"v1.0"}
    assert replay_snapshot(part) == facts_snapshot(part)
    (run,) = list(part.events(["consolidation_run"]))[-1:]
    assert run.payload["rule_version"] == "v1.0"


def test_a_new_store_uses_the_configured_version(part):
    part.append_many(history(2))
    report = consolidation_pass(part)
    assert report.rule_version == "v2.0" and report.upgrade_available is None
    assert {f.rule_version for f in part.facts()} == {"v2.0"}
    assert {f.value["rule_version"] for f in part.facts()} == {"v2.0"}


def test_v1_reproduces_what_it_did_before_rule_versions():
    """The v1.0 snapshot of a fixed stream, byte for byte as the release before v2.0 made
    it (its SHA-256, computed with that release)."""
    config = RulesConfig(time_bucket_s=60.0, recent_window_s=600.0, rule_version="v1.0")
    with tempfile.TemporaryDirectory() as folder:
        store = MemoryStore(f"sqlite:///{folder}/m.db")
        part = store.partition("f" * 64)
        events = varied_events(400)
        part.append_many(events[:250])
        consolidation_pass(part, config)
        part.append_many(events[250:])
        part.append_many([result_event(300 + i, success=i % 4 == 0, force=25.0, zone="zone_1")
                          for i in range(40)])
        consolidation_pass(part, config)
        snapshot = facts_snapshot(part)
        store.close()
    assert hashlib.sha256(snapshot.encode()).hexdigest() == \
        "f56e0800316601dfe9343801ed4a7b2f2991c190581f5804d60a6ea63af7a112"


def test_an_unknown_rule_version_is_refused():
    with pytest.raises(Exception, match="rule_version"):
        RulesConfig(rule_version="v9.9")


@pytest.mark.parametrize("band_bucket_s", [5400.0, 1800.0, 0.0])
def test_band_buckets_that_are_not_whole_time_buckets_are_refused(band_bucket_s):
    with pytest.raises(ConsolidationConfigError, match="band_bucket_s=.*time_bucket_s="):
        RulesConfig(band_bucket_s=band_bucket_s)


# -- what explain shows of regimes -----------------------------------------------------------
def test_explain_shows_both_regimes_the_boundary_and_the_test(part):
    from robot_memory.grounding.explain import explain_fact, format_explanation

    part.append_many(history(20))
    consolidation_pass(part)
    before = format_explanation(explain_fact(part, skill_fact(part)))
    assert "one regime: no change found" in before
    assert "recommended force_n 25.0" in before
    for _ in attempts(part, 20, 10, cracks_at_25):
        pass
    text = format_explanation(explain_fact(part, skill_fact(part)))
    regime = skill_fact(part).value["regime"]
    assert f"regime since event time {regime['since_ns']} ns, after 1 change(s)" in text
    assert "set by force_n band 25.0" in text and "direction down" in text
    assert "regime before it" in text and "25.0: 190 of 200" in text
    assert "recommended force_n 15.0" in text

"""bench.changing_world checks itself: the scenarios give the success probabilities they
describe, every arm faces the same draws (so the oracle fails only at the base rate), and
a seed gives the same figures every time. Today's rules' figures are a baseline that new
rules will change: nothing here holds them."""

import json

import numpy as np
import pytest

from bench import changing_world as cw

CHANGE = 40  # day index of the change (day 41 counted from 1)


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("changing_world") / "changing_world.json"
    assert cw.main(["--quick", "--out", str(out)]) == 0
    return json.loads(out.read_text())


def test_step_cracks_25_n_from_the_change_day_and_15_n_works():
    step = cw.SCENARIOS["step"](CHANGE)
    assert step.probability(CHANGE - 1, 25.0, "lab") == 0.95
    assert step.probability(CHANGE - 1, 15.0, "lab") == 0.60
    assert step.working_force(CHANGE - 1, "lab") == 25.0
    for day in (CHANGE, CHANGE + 29):
        assert step.probability(day, 25.0, "lab") == 0.05
        assert step.probability(day, 15.0, "lab") == 0.95
        assert step.working_force(day, "lab") == 15.0
    assert step.failure_reason(CHANGE, 25.0, "lab") == "cracked"
    assert step.failure_reason(CHANGE, 15.0, "lab") == "slipped"
    assert step.failure_reason(CHANGE - 1, 25.0, "lab") == "slipped"
    # A force is judged by its band: a median between the two grips as its side does.
    assert step.probability(CHANGE, 20.0, "lab") == 0.05
    assert step.probability(CHANGE, 17.5, "lab") == 0.95


def test_burst_fails_every_force_for_one_day_then_is_as_before():
    burst = cw.SCENARIOS["burst"](CHANGE)
    for force in cw.FORCES:
        assert burst.probability(CHANGE, force, "lab") == 0.05
        assert burst.probability(CHANGE + 1, force, "lab") == \
            burst.probability(CHANGE - 1, force, "lab") == cw.BEFORE[force]
    assert burst.working_force(CHANGE, "lab") == 25.0  # a tie: the default
    assert burst.working_force(CHANGE + 1, "lab") == 25.0


def test_drift_declines_25_n_over_weeks_while_15_n_stays_good():
    drift = cw.SCENARIOS["drift"](CHANGE)
    high = [drift.probability(day, 25.0, "lab") for day in range(CHANGE - 1, CHANGE + 35)]
    assert high[0] == 0.95
    assert all(a >= b for a, b in zip(high, high[1:]))
    assert 0.9 < high[1] < 0.95  # slowly: the first changed day is still nearly as before
    assert high[1 + cw.DRIFT_DAYS // 2] == pytest.approx(0.95 - 0.9 * 15 / 28)
    assert high[cw.DRIFT_DAYS] == pytest.approx(0.05) and high[-1] == pytest.approx(0.05)
    assert {drift.probability(day, 15.0, "lab") for day in range(CHANGE, CHANGE + 35)} == \
        {0.95}


def test_zone_local_changes_the_lab_only():
    zone = cw.SCENARIOS["zone_local"](CHANGE)
    assert zone.environments == ("lab", "kitchen")
    assert zone.probability(CHANGE + 3, 25.0, "lab") == 0.05
    assert zone.probability(CHANGE + 3, 25.0, "kitchen") == 0.95
    assert zone.probability(CHANGE + 3, 15.0, "kitchen") == 0.60
    assert zone.working_force(CHANGE + 3, "kitchen") == 25.0
    assert zone.failure_reason(CHANGE + 3, 25.0, "kitchen") == "slipped"


def test_steady_changes_nothing():
    steady = cw.SCENARIOS["steady"](CHANGE)
    assert steady.environments == ("lab", "kitchen")
    for day in (0, CHANGE - 1, CHANGE, CHANGE + 29):
        for env in steady.environments:
            assert {f: steady.probability(day, f, env) for f in cw.FORCES} == cw.BEFORE
            assert steady.working_force(day, env) == 25.0


def test_an_attempt_succeeds_at_its_probability():
    step = cw.SCENARIOS["step"](CHANGE)
    rng = np.random.default_rng(7)
    for day, force, p in ((CHANGE - 1, 25.0, 0.95), (CHANGE, 25.0, 0.05), (CHANGE, 15.0, 0.95)):
        share = np.mean([step.success(day, force, "lab", rng) for _ in range(4000)])
        assert abs(share - p) < 0.02, (day, force, share)


def test_the_oracle_fails_only_at_the_base_rate(quick):
    for scenario, arms in quick["results"].items():
        oracle = arms["oracle"]["changed"]
        assert set(oracle["avoidable_failures"]["per_seed"]) == {0}, scenario
        assert set(oracle["recommends_working_share"]["per_seed"]) == {1.0}, scenario
        assert set(oracle["attempts_until_recommends_working"]["per_seed"]) == {1}, scenario


def test_every_arm_faces_the_same_draws(quick):
    """Paired: an arm's unavoidable failures are exactly the oracle's failures."""
    for scenario, arms in quick["results"].items():
        oracle = arms["oracle"]["changed"]["failed"]["per_seed"]
        for arm, figures in arms.items():
            for label, block in figures.items():
                if label not in ("changed", "unchanged"):
                    continue
                failed = block["failed"]["per_seed"]
                avoidable = block["avoidable_failures"]["per_seed"]
                reference = arms["oracle"][label]["failed"]["per_seed"]
                assert [f - a for f, a in zip(failed, avoidable)] == reference, (scenario, arm)
        assert all(0 <= f <= 100 for f in oracle)


def test_the_quick_run_writes_every_scenario_arm_and_goal(quick):
    assert set(quick["results"]) == set(cw.SCENARIOS)
    assert quick["arms"] == ["none", "memory:v1", "memory:v2", "sliding_window", "oracle"]
    settings = quick["settings"]
    assert settings["change_day"] == settings["history_days"] + 1
    for scenario, arms in quick["results"].items():
        memory = arms["memory:v1"]
        changed = memory["changed"]
        assert changed["attempts"] == settings["days_after"] * cw.ATTEMPTS_PER_DAY
        for metric in ("failed", "avoidable_failures", "status_flips",
                       "attempts_until_recommends_working"):
            low, high = changed[metric]["ci95"]
            assert low <= changed[metric]["mean"] <= high, (scenario, metric)
        assert len(memory["timeline_first_seed"]) == settings["days_after"] + 2
        assert all(n > 0 for n in memory["readme_facts0_not_the_skill_fact"]
                   ["ok_answers_per_seed"])
        if scenario == "steady":
            assert scenario not in quick["goals"]["memory:v1"]
            continue
        goal = quick["goals"]["memory:v1"][scenario]
        assert goal["bound"] == 5 + 3
        assert goal["times_fewer_than_today"] == 1.0  # today's rules against themselves
        assert ("change_stays_local" in goal) == (scenario == "zone_local")
    assert "unchanged" in quick["results"]["zone_local"]["memory:v1"]


def test_a_seed_gives_the_same_figures_every_time(tmp_path):
    for i in range(2):
        (tmp_path / str(i)).mkdir()
    runs = [cw.run_one("zone_local", arm, cw.SEEDS[0], 5, 4, tmp_path / str(i))
            for i in range(2) for arm in ("memory:v1", "none", "sliding_window")]
    assert runs[:3] == runs[3:]
    assert runs[0]["changed"]["attempts"] == 40


def test_the_whole_quick_run_repeats_itself(quick, tmp_path):
    out = tmp_path / "again.json"
    assert cw.main(["--quick", "--out", str(out)]) == 0
    again = json.loads(out.read_text())
    assert again["results"] == quick["results"] and again["goals"] == quick["goals"]


def test_the_memory_arm_writes_results_through_the_intake_and_passes_daily(tmp_path):
    from robot_memory.event_kinds import CONSOLIDATION_RUN, EXECUTION_RESULT

    scenario = cw.SCENARIOS["step"](3)
    arm = cw.Memory(cw.RULE_SETS["v1"], f"sqlite:///{tmp_path / 'm.db'}", scenario.environments)
    try:
        attempts = cw.simulate(scenario, arm, cw.SEEDS[0], 5)
        results = list(arm.partition.events([EXECUTION_RESULT]))
        runs = list(arm.partition.events([CONSOLIDATION_RUN]))
        assert len(results) == len(attempts) == 5 * cw.ATTEMPTS_PER_DAY
        assert len(runs) == 5
        first = results[0]
        assert first.stamp_ns == cw.attempt_ns(0, 0)
        assert first.payload["received_ns"] == first.stamp_ns
        assert first.payload["parameters"] == {"force_n": 25.0}
        assert [e.payload["parameters"]["force_n"] for e in results[30:]] == \
            [a.force for a in attempts[30:]]
        assert [s["lab"][0] for s in arm.after_pass][2] == "active"
    finally:
        arm.close()

"""The MuJoCo grasp scene: outcomes come from contact forces, not from a table."""

import pytest

pytest.importorskip("mujoco")

from robot_memory.sim.episodes import EXPLORATION_FORCES_N, episodes  # noqa: E402
from robot_memory.sim.scene import MAX_FORCE_N, OBJECTS, GraspWorld  # noqa: E402

SEED = 7


@pytest.fixture(scope="module")
def world():
    return GraspWorld()


def test_glass_cup_slips_when_squeezed_too_little(world):
    outcome = world.attempt("glass_cup", 5.0, SEED)
    assert not outcome.success and outcome.failure_reason == "slipped"
    assert outcome.lift_m < 0.01 and outcome.measured_mass_kg == 0.0


def test_glass_cup_holds_in_its_force_window_and_the_lift_weighs_it(world):
    outcome = world.attempt("glass_cup", 25.0, SEED)
    assert outcome.success and outcome.failure_reason == ""
    # Mass is read off the lift joint's load; the episode jitters it by at most 10%.
    assert 0.9 * OBJECTS["glass_cup"].mass_kg * 0.97 < outcome.measured_mass_kg \
        < 1.1 * OBJECTS["glass_cup"].mass_kg * 1.03
    assert outcome.grip_force_n == pytest.approx(25.0, rel=0.1)


def test_glass_cup_cracks_above_its_crack_force(world):
    outcome = world.attempt("glass_cup", 45.0, SEED)
    assert not outcome.success and outcome.failure_reason == "cracked"
    assert outcome.grip_force_n > OBJECTS["glass_cup"].crack_force_n


def test_heavy_mug_holds_at_high_force_and_weighs_more_than_the_cup(world):
    mug = world.attempt("heavy_mug", 40.0, SEED)
    cup = world.attempt("glass_cup", 25.0, SEED)
    assert mug.success and mug.measured_mass_kg > 2 * cup.measured_mass_kg


def test_unknown_object_slips_even_at_the_gripper_s_maximum(world):
    outcome = world.attempt("unknown_object", MAX_FORCE_N, SEED)
    assert not outcome.success and outcome.failure_reason == "slipped"


def test_same_episode_same_physics(world):
    assert world.attempt("glass_cup", 15.0, 11) == world.attempt("glass_cup", 15.0, 11)


def test_episode_stream_is_fixed_by_its_seed():
    stream = episodes(20260524, 30)
    assert stream == episodes(20260524, 30)
    assert {e.target for e in stream} == set(OBJECTS)
    assert {e.exploration_force_n for e in stream} <= set(EXPLORATION_FORCES_N)

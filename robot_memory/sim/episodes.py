"""The episode stream: which object comes next, its physical jitter and the force an
exploring planner would pick. Fixed by one seed, so the run with memory and the run
without it face exactly the same episodes (a paired comparison)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robot_memory.sim.scene import OBJECTS

EXPLORATION_FORCES_N = (5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0, 45.0)


@dataclass(frozen=True)
class Episode:
    number: int
    target: str
    episode_seed: int  # jitters the object's mass and friction in the physics
    exploration_force_n: float  # what a planner without knowledge tries


def episodes(seed: int, count: int) -> list[Episode]:
    rng = np.random.default_rng(seed)
    names = sorted(OBJECTS)
    targets = rng.integers(0, len(names), count)
    forces = rng.integers(0, len(EXPLORATION_FORCES_N), count)
    physics = rng.integers(0, 2**31 - 1, count)
    return [Episode(i, names[t], int(p), EXPLORATION_FORCES_N[f])
            for i, (t, f, p) in enumerate(zip(targets, forces, physics))]


def held_out_episodes(seed: int, segments: list[tuple[str, int]], first_number: int = 0
                      ) -> list[Episode]:
    """Objects the robot has not handled, one after another: `segments` is a list of
    (target, episodes). Each episode's jitter and exploratory force come from the seed,
    as in `episodes`; numbers continue from `first_number` (after the learning stream)."""
    rng = np.random.default_rng(seed)
    stream = []
    for target, count in segments:
        forces = rng.integers(0, len(EXPLORATION_FORCES_N), count)
        physics = rng.integers(0, 2**31 - 1, count)
        stream += [Episode(first_number + len(stream) + i, target, int(p),
                           EXPLORATION_FORCES_N[f])
                   for i, (f, p) in enumerate(zip(forces, physics))]
    return stream

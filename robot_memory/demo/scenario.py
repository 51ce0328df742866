"""The grasp example of "Episodic-to-Semantic Consolidation Without Identity Drift":
3 failures at 5 N, 1 at 15 N, then 12 successes at 25 N."""

from __future__ import annotations

from dataclasses import dataclass

SKILL = "manipulation.grasp"
TARGET = "glass_cup"
ENVIRONMENT = "sim_relaxed"
ATTEMPT_SECONDS = 3.0  # sim time one attempt takes


@dataclass(frozen=True)
class Attempt:
    force_n: float
    success: bool
    failure_reason: str = ""


def glass_cup_attempts() -> list[Attempt]:
    return ([Attempt(5.0, False, "slipped")] * 3 + [Attempt(15.0, False, "slipped")]
            + [Attempt(25.0, True)] * 12)

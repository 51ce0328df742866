"""The planner's decision rule, without ROS: explore while memory abstains, use the
recommended parameters when it answers, skip (escalate to an operator) when the
remembered success rate is below the threshold and no attempt has ever worked.

The skip rule is the paper's ("attempt only at confidence >= threshold"), applied once
there is enough evidence (`min_evidence` attempts) that nothing known works: a rate
that mixes early exploratory forces would otherwise also rule out an object that
works well at the recommended force.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

EXPLORE, EXPLOIT, SKIP = "explore", "exploit", "skip"


@dataclass(frozen=True)
class Decision:
    action: str
    force_n: float = 0.0
    why: str = ""


@dataclass(frozen=True)
class PolicyConfig:
    threshold: float = 0.5
    min_evidence: int = 6


def decide(answer, exploration_force_n: float, config: PolicyConfig = PolicyConfig()) -> Decision:
    """`answer` is a GroundingResult (robot_memory.client); its facts are SemanticFact
    messages (success_rate, n_observations, recommended_parameters)."""
    if answer is None or not answer.ok:
        reason = getattr(answer, "reason_code", "") or "no memory"
        return Decision(EXPLORE, exploration_force_n, f"memory abstains ({reason})")
    fact = next((f for f in answer.facts if f.kind == "skill_success_rate"), None)
    if fact is None:
        return Decision(EXPLORE, exploration_force_n, "no success-rate fact")
    recommended = {kv.key: kv.value for kv in fact.recommended_parameters}
    if "force_n" in recommended and math.isfinite(recommended["force_n"]):
        return Decision(EXPLOIT, recommended["force_n"],
                        f"recommended force_n {recommended['force_n']:g} "
                        f"(rate {fact.success_rate:.2f}, n {fact.n_observations})")
    if fact.success_rate < config.threshold and fact.n_observations >= config.min_evidence:
        return Decision(SKIP, 0.0, f"success rate {fact.success_rate:.2f} below "
                        f"{config.threshold} after {fact.n_observations} attempts")
    return Decision(EXPLORE, exploration_force_n, "nothing has worked yet")

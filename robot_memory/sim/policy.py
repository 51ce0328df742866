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
BORROW = "borrow"  # explore with the force an analogy recommends
ANALOGY = "ANALOGY"  # GroundingResult.status of an answer that lends other targets' facts
PRIOR = "PRIOR"  # GroundingResult.status of an answer with the fleet's facts of this target
ONLY_CANDIDATES = "only_candidates"  # the reason_code while the own facts are too few


@dataclass(frozen=True)
class Decision:
    action: str
    force_n: float = 0.0
    why: str = ""
    lent_from: str = ""  # with BORROW: the known target whose force is borrowed


@dataclass(frozen=True)
class PolicyConfig:
    threshold: float = 0.5
    min_evidence: int = 6


def _recommended_force(fact) -> float | None:
    recommended = {kv.key: kv.value for kv in fact.recommended_parameters}
    force = recommended.get("force_n")
    return force if force is not None and math.isfinite(force) else None


def borrow(answer, exploration_force_n: float) -> Decision:
    """An ANALOGY answer: explore with the recommended force of the nearest analogy that
    has one (analogies come nearest first), else with the episode's own force. Never
    SKIP and never EXPLOIT: nothing here is the robot's knowledge of this target."""
    for analogy in answer.analogies:
        for fact in analogy.facts:
            if fact.kind == "skill_success_rate" and \
                    (force := _recommended_force(fact)) is not None:
                return Decision(BORROW, force, f"analogy {analogy.target_class} (distance "
                                f"{analogy.distance:.2f}): its recommended force_n {force:g}",
                                lent_from=analogy.target_class)
    return Decision(EXPLORE, exploration_force_n, "analogies recommend no force")


def borrow_prior(answer, exploration_force_n: float,
                 config: PolicyConfig = PolicyConfig()) -> Decision:
    """A PRIOR answer: explore with the recommended force of the sibling with the most
    attempts (ties by identity, as the sources come); never EXPLOIT, since a sibling's
    evidence is not this robot's and only its own attempts can show that its objects
    differ. When no sibling's force ever worked and the blend is below the threshold
    after `min_evidence` attempts of the fleet, SKIP (escalate), as the robot would on
    its own evidence: the same arm has already failed where this one would try."""
    sources = [s for prior in answer.priors for s in prior.sources
               if s.fact.kind == "skill_success_rate"]
    for source in sorted(sources, key=lambda s: -s.fact.n_observations):
        force = _recommended_force(source.fact)
        if force is not None:
            who = source.agent_id or source.identity_hash[:12]
            return Decision(BORROW, force, f"fleet prior from {who} "
                            f"(n {source.fact.n_observations}): its recommended force_n "
                            f"{force:g}", lent_from=who)
    for prior in answer.priors:
        if prior.blended_success_rate < config.threshold and \
                prior.prior_n + prior.own_n >= config.min_evidence:
            return Decision(SKIP, 0.0, f"fleet prior: blended success rate "
                            f"{prior.blended_success_rate:.2f} below {config.threshold} after "
                            f"{prior.prior_n} fleet and {prior.own_n} own attempts")
    return Decision(EXPLORE, exploration_force_n, "fleet priors recommend no force")


def decide(answer, exploration_force_n: float, config: PolicyConfig = PolicyConfig(),
           lent: Decision | None = None) -> Decision:
    """`answer` is a GroundingResult (robot_memory.ros.client); its facts are SemanticFact
    messages (success_rate, n_observations, recommended_parameters). `lent`: the last
    BORROW decision for this target, if any."""
    if answer is not None and answer.status == ANALOGY:
        return borrow(answer, exploration_force_n)
    if answer is not None and answer.status == PRIOR:
        return borrow_prior(answer, exploration_force_n, config)
    if lent is not None and lent.action == BORROW and answer is not None and \
            answer.status == "ABSTAIN" and answer.reason_code == ONLY_CANDIDATES:
        return Decision(BORROW, lent.force_n, f"{lent.why}, lent before (own facts still "
                        "candidates)", lent_from=lent.lent_from)
    if answer is None or not answer.ok:
        reason = getattr(answer, "reason_code", "") or "no memory"
        return Decision(EXPLORE, exploration_force_n, f"memory abstains ({reason})")
    fact = next((f for f in answer.facts if f.kind == "skill_success_rate"), None)
    if fact is None:
        return Decision(EXPLORE, exploration_force_n, "no success-rate fact")
    force = _recommended_force(fact)
    if force is not None:
        return Decision(EXPLOIT, force, f"recommended force_n {force:g} "
                        f"(rate {fact.success_rate:.2f}, n {fact.n_observations})")
    if fact.success_rate < config.threshold and fact.n_observations >= config.min_evidence:
        return Decision(SKIP, 0.0, f"success rate {fact.success_rate:.2f} below "
                        f"{config.threshold} after {fact.n_observations} attempts")
    return Decision(EXPLORE, exploration_force_n, "nothing has worked yet")

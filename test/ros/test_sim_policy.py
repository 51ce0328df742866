"""The sim planner's rule on real grounding answers (GroundingResult + SemanticFact)."""

import math

from robot_memory.ros.client import GroundingResult
from robot_memory.msg import KeyValue, SemanticFact
from robot_memory.sim.policy import BORROW, EXPLOIT, EXPLORE, SKIP, PolicyConfig, decide


def answer(rate, n, force=None):
    fact = SemanticFact(kind="skill_success_rate", success_rate=rate, n_observations=n)
    if force is not None:
        fact.recommended_parameters = [KeyValue(key="force_n", value=force)]
    return GroundingResult("OK", facts=(fact,))


def test_explores_with_its_own_force_while_memory_abstains():
    decision = decide(GroundingResult("ABSTAIN", "no_fact"), 15.0)
    assert decision.action == EXPLORE and decision.force_n == 15.0 and "no_fact" in decision.why


def test_uses_the_recommended_force_when_memory_answers():
    decision = decide(answer(0.4, 10, force=25.0), 5.0)
    assert decision.action == EXPLOIT and decision.force_n == 25.0


def test_skips_below_threshold_once_enough_attempts_found_nothing_that_works():
    assert decide(answer(0.0, 6), 5.0).action == SKIP
    assert decide(answer(0.0, 5), 5.0).action == EXPLORE  # too little evidence yet
    assert decide(answer(0.6, 8), 5.0, PolicyConfig(threshold=0.5)).action == EXPLORE


def test_nan_recommendation_is_not_used():
    decision = decide(answer(0.0, 2, force=math.nan), 10.0)
    assert decision.action == EXPLORE and decision.force_n == 10.0


def analogy_answer(*cases):
    from robot_memory.msg import Analogy
    return GroundingResult("ANALOGY", "no_fact", analogies=tuple(
        Analogy(target_class=target, distance=distance, facts=[answer(rate, n, force).facts[0]])
        for target, distance, rate, n, force in cases))


def test_an_analogy_is_borrowed_never_known():
    # The nearest analogy with a recommended force lends it; never EXPLOIT, never SKIP.
    decision = decide(analogy_answer(("glass_cup", 0.1, 0.9, 20, 27.5),
                                     ("heavy_mug", 0.3, 0.9, 20, 32.5)), 5.0)
    assert (decision.action, decision.force_n, decision.lent_from) == \
        (BORROW, 27.5, "glass_cup")
    # A lent fact that would make the robot skip its own target does not here.
    decision = decide(analogy_answer(("unknown_object", 0.1, 0.0, 20, None)), 15.0)
    assert (decision.action, decision.force_n) == (EXPLORE, 15.0)


def test_the_lent_force_is_kept_only_while_own_facts_are_candidates():
    lent = decide(analogy_answer(("glass_cup", 0.1, 0.9, 20, 27.5)), 5.0)
    candidates = GroundingResult("ABSTAIN", "only_candidates")
    assert decide(candidates, 5.0, lent=lent).force_n == 27.5
    assert decide(GroundingResult("ABSTAIN", "no_fact"), 5.0, lent=lent).action == EXPLORE
    own = decide(answer(0.0, 6), 5.0, lent=lent)  # its own fact answers: the rule is its own
    assert own.action == SKIP


def prior_answer(*sources, blended=0.8, prior_n=20, own_n=0):
    from robot_memory.msg import Prior, PriorSource
    prior = Prior(skill_id="manipulation.grasp", target_class="glass_cup",
                  blended_success_rate=blended, prior_n=prior_n, own_n=own_n)
    for agent, n, force in sources:
        fact = SemanticFact(kind="skill_success_rate", n_observations=n)
        if force is not None:
            fact.recommended_parameters = [KeyValue(key="force_n", value=force)]
        prior.sources.append(PriorSource(identity_hash=agent * 64, agent_id=agent, fact=fact))
    return GroundingResult("PRIOR", "no_fact", priors=(prior,))


def test_a_prior_lends_the_most_experienced_siblings_force_never_its_own_knowledge():
    decision = decide(prior_answer(("a", 5, 30.0), ("b", 12, 20.0)), 10.0)
    assert (decision.action, decision.force_n, decision.lent_from) == (BORROW, 20.0, "b")
    assert "fleet prior from b (n 12)" in decision.why


def test_a_prior_with_no_working_force_explores_until_the_fleet_has_seen_enough():
    assert decide(prior_answer(("a", 3, None), blended=0.0, prior_n=3), 10.0).action == EXPLORE
    decision = decide(prior_answer(("a", 12, None), blended=0.0, prior_n=12), 10.0)
    assert decision.action == SKIP and "12 fleet and 0 own attempts" in decision.why
    assert decide(prior_answer(("a", 12, None), blended=0.7, prior_n=12), 10.0).action == \
        EXPLORE

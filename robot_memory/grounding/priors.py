"""Fleet priors: what robots of the same embodiment learned, lent to this one as a prior.

A sibling's skill_success_rate fact of a skill on a target (same skill, target and
environment as the question) is served beside the robot's own evidence, never as it:
under status PRIOR when the robot has no servable fact of its own, or in `priors` of an
OK answer. Where the facts come from (a verified bundle, a PostgreSQL priors role):
priors_sources.py. The blend, deterministic and documented (docs/priors.md):

    prior_n, prior_successes = sums over the sources (sorted by identity hash)
    prior_rate   = prior_successes / prior_n
    prior_weight = min(prior_n, max_weight)        # pseudo-counts the fleet lends
    blended      = (own_successes + prior_weight * prior_rate) / (own_n + prior_weight)
    own_share    = own_n / (own_n + prior_weight)

That is the beta-prior shrinkage of the paper's calibrated baseline with the fleet's rate
as the prior mean: with no own attempt the answer is the fleet's rate, and each own
attempt moves it toward the robot's own (after max_weight own attempts own_share is 1/2).
The blend is computed when the answer is built: the stored facts stay a function of the
robot's own log. ROS-free.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from robot_memory.consolidation.fact_schemas import stored_fact_problem
from robot_memory.consolidation.rules import STATUS_ACTIVE
from robot_memory.store import FactRow

PRIOR_KIND = "skill_success_rate"  # the kind with counts a rate can be pooled from
BLEND_DECIMALS = 6


@dataclass(frozen=True)
class PriorSettings:
    """The grounding_server's prior parameters (parameters.yaml holds the same defaults;
    a test keeps them equal)."""

    max_weight: float = 10.0


@dataclass(frozen=True)
class PriorFact:
    """A sibling's fact, as read from its source: who learned it and where it came from
    (`origin`: the bundle's path, or the fleet store)."""

    identity_hash: str
    agent_id: str
    origin: str
    fact: FactRow

    @cached_property
    def counts(self) -> tuple[int, int]:
        """(attempts, successes) of the sibling's fact, read from its value once: the
        answers that serve it are built on the request path."""
        return _counts(self.fact.peek_value())


@dataclass(frozen=True)
class Prior:
    """The fleet's evidence about one skill on one target in one environment, and how it
    blends with the robot's own (the module docstring)."""

    skill_id: str
    target_class: str
    environment: str
    sources: tuple[PriorFact, ...]
    prior_n: int
    prior_successes: int
    prior_weight: float
    own_n: int
    own_successes: int
    blended_success_rate: float
    own_share: float


def _counts(value: dict) -> tuple[int, int]:
    """(attempts, successes) of a skill_success_rate value; (0, 0) when it gives none
    (an operator's fact may not: fact_schemas.py) or not as counts."""
    try:
        n, successes = value.get("n"), value.get("successes")
        if n.__class__ is int and successes.__class__ is int:
            return n, successes
    except AttributeError:  # not a JSON object
        pass
    return 0, 0


def blend(key: tuple[str, str, str], sources: tuple[PriorFact, ...], own: FactRow | None,
          settings: PriorSettings) -> Prior:
    """The Prior of `sources` (non-empty, sorted) for `key`, blended with `own`: the
    robot's own fact of that key whatever its status (a candidate's attempts are the
    robot's own evidence too), or None."""
    prior_n = sum(s.counts[0] for s in sources)
    prior_successes = sum(s.counts[1] for s in sources)
    # own.value is kept parsed: only the facts asked about with priors pay for it.
    own_n, own_successes = _counts(own.value) if own is not None else (0, 0)
    weight = float(min(prior_n, settings.max_weight))
    prior_rate = prior_successes / prior_n if prior_n else 0.0
    total = own_n + weight
    blended = (own_successes + weight * prior_rate) / total if total else 0.0
    own_share = own_n / total if total else 0.0
    return Prior(*key, sources, prior_n, prior_successes, weight, own_n, own_successes,
                 round(blended, BLEND_DECIMALS), round(own_share, BLEND_DECIMALS))


class PriorIndex:
    """The siblings' active skill_success_rate facts, by (skill, target, environment),
    each key's sources sorted by identity hash. Immutable; built when sources are
    loaded, never on the request path."""

    def __init__(self, facts: Iterable[PriorFact], settings: PriorSettings = PriorSettings()):
        self.settings = settings
        by_key: dict[tuple[str, str, str], list[PriorFact]] = {}
        for prior in facts:
            fact = prior.fact
            if fact.kind != PRIOR_KIND or fact.status != STATUS_ACTIVE:
                continue
            # A sibling's facts come from outside (a bundle, a fleet store): an
            # operator's is checked against its kind's shape, and any fact whose value
            # cannot be read is left out, alone.
            try:
                if stored_fact_problem(fact.kind, fact.rule_version,
                                       fact.peek_value) is not None:
                    continue
                value = fact.peek_value()
                key = (value["skill_id"], value.get("target_class", ""),
                       value.get("environment", ""))
                if not all(part.__class__ is str for part in key):
                    continue
            except (ValueError, TypeError, KeyError, AttributeError):
                continue
            if prior.counts[0] <= 0:  # read here, once, for every answer that serves it
                continue
            by_key.setdefault(key, []).append(prior)
        self._by_key = {key: tuple(sorted(found, key=lambda p: (p.identity_hash, p.origin)))
                        for key, found in by_key.items()}
        self._by_skill: dict[str, list[tuple[str, str, str]]] = {}
        for key in sorted(self._by_key):
            self._by_skill.setdefault(key[0], []).append(key)
        self.size = sum(len(found) for found in self._by_key.values())
        self.identities = tuple(sorted({p.identity_hash for found in self._by_key.values()
                                        for p in found}))

    def keys_for(self, skill_id: str, target_class: str,
                 environment: str) -> list[tuple[str, str, str]]:
        """The keys matching a question (an empty target or environment matches any),
        in key order."""
        return [key for key in self._by_skill.get(skill_id, ())
                if (not target_class or key[1] == target_class)
                and (not environment or key[2] == environment)]

    def sources(self, key: tuple[str, str, str]) -> tuple[PriorFact, ...]:
        return self._by_key[key]


EMPTY_PRIORS = PriorIndex(())


def audit_entries(priors: Iterable[Prior]) -> list[dict]:
    """The priors of an answer as the consultation audit keeps them: which key, whose
    facts (identity, origin, fact key and rule version) with what counts, and the blend
    served."""
    return [{"skill_id": p.skill_id, "target_class": p.target_class,
             "environment": p.environment, "prior_n": p.prior_n,
             "prior_successes": p.prior_successes, "prior_weight": p.prior_weight,
             "own_n": p.own_n, "own_successes": p.own_successes,
             "blended_success_rate": p.blended_success_rate, "own_share": p.own_share,
             "sources": [{"identity_hash": s.identity_hash, "agent_id": s.agent_id,
                          "origin": s.origin, "fact_id": s.fact.id, "key": s.fact.key,
                          "rule_version": s.fact.rule_version,
                          "n": s.counts[0], "successes": s.counts[1]}
                         for s in p.sources]}
            for p in priors]

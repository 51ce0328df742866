"""A planner's question and the grounding answer, ROS-free: their fields, the status
and reason codes, and the checks a request passes before any lookup."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from robot_memory.grounding.analogies import Analogy
from robot_memory.consolidation.rules import FACT_KINDS
from robot_memory.grounding.priors import Prior
from robot_memory.grounding.limits import MAX_TARGET_PROPERTIES
from robot_memory.store import FactRow

# ANALOGY: no fact of the robot's own, the facts of similar known targets instead (only
# for a request that allows analogies; never OK, so never taken for the robot's own).
# PRIOR: no servable fact of the robot's own, the fleet's facts of this very target
# instead (only for a request that allows priors; docs/priors.md).
OK, ABSTAIN, IDENTITY_UNVERIFIED, INVALID_REQUEST, ANALOGY, PRIOR = 0, 1, 2, 3, 4, 5
REASON_NO_FACT = "no_fact"
REASON_NO_CLOSE_CASE = "no_close_case"
REASON_ONLY_CANDIDATES = "only_candidates"
REASON_CONTESTED = "contested"
REASON_BELOW_CONFIDENCE = "below_confidence"
# Confident enough as stored, but the evidence is old next to the robot's newest
# (grounding_server's stale_half_life_s): the world may have changed since.
REASON_STALE = "stale"
REASON_IDENTITY_UNVERIFIED = "identity_unverified"
REASON_INVALID_REQUEST = "invalid_request"

MAX_RESULTS_CAP = 100
MAX_ANALOGIES_CAP = 10
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$")


@dataclass(frozen=True)
class GroundingRequest:
    """A planner's question, ROS-free (the GroundingQuery request fields)."""

    skill_id: str
    target_class: str = ""
    environment: str = ""
    zone: str = ""
    fact_kinds: tuple[str, ...] = ()
    min_confidence: float = 0.0
    max_results: int = 0
    # With no fact of the skill on target_class, answer with similar known targets.
    allow_analogies: bool = False
    # (name, value) measured on target_class, e.g. (("mass_kg", 0.31),).
    target_properties: tuple[tuple[str, float], ...] = ()
    max_analogies: int = 0  # 0 = the server's AnalogySettings.k
    # Serve the facts of robots of the same embodiment as priors (docs/priors.md).
    allow_priors: bool = False


@dataclass(frozen=True)
class GroundingAnswer:
    """OK with facts, ANALOGY with lent facts in `analogies` (and the asked target's own
    context facts in `facts`), PRIOR with the fleet's evidence in `priors`, or ABSTAIN /
    INVALID_REQUEST / IDENTITY_UNVERIFIED with a reason. An OK answer to a request that
    allows priors carries them in `priors` too, blended with the robot's own counts."""

    status: int
    reason_code: str = ""
    reason: str = ""
    facts: tuple[FactRow, ...] = field(default_factory=tuple)
    analogies: tuple[Analogy, ...] = field(default_factory=tuple)
    priors: tuple[Prior, ...] = field(default_factory=tuple)


def invalid(field_name: str, why: str) -> GroundingAnswer:
    """An INVALID_REQUEST answer whose reason names the field."""
    return GroundingAnswer(INVALID_REQUEST, REASON_INVALID_REQUEST, f"{field_name}: {why}")


def validate_request(req: GroundingRequest) -> GroundingAnswer | None:
    """An INVALID_REQUEST answer naming the bad field, or None if the request is usable."""
    if not req.skill_id:
        return invalid("skill_id", "required")
    for name in ("skill_id", "target_class", "environment", "zone"):
        value = getattr(req, name)
        if value and not _NAME.match(value):
            return invalid(name, f"{value!r} is not a plain name")
    unknown = sorted(set(req.fact_kinds) - set(FACT_KINDS))
    if unknown:
        return invalid("fact_kinds", f"unknown kind(s) {unknown}; known: {list(FACT_KINDS)}")
    if not math.isfinite(req.min_confidence) or not 0.0 <= req.min_confidence <= 1.0:
        return invalid("min_confidence", f"{req.min_confidence} is not in [0, 1]")
    if req.max_results > MAX_RESULTS_CAP:
        return invalid("max_results", f"{req.max_results} is above the cap {MAX_RESULTS_CAP}")
    if req.max_analogies > MAX_ANALOGIES_CAP:
        return invalid("max_analogies",
                       f"{req.max_analogies} is above the cap {MAX_ANALOGIES_CAP}")
    return _validate_target_properties(req.target_properties)


def _validate_target_properties(
        properties: tuple[tuple[str, float], ...]) -> GroundingAnswer | None:
    if len(properties) > MAX_TARGET_PROPERTIES:
        return invalid("target_properties",
                       f"{len(properties)} entries, more than {MAX_TARGET_PROPERTIES}")
    seen = set()
    for i, (name, value) in enumerate(properties):
        if not _NAME.match(name):
            return invalid(f"target_properties[{i}]", f"{name!r} is not a plain name")
        if name in seen:
            return invalid(f"target_properties[{i}]", f"{name!r} is given twice")
        if not math.isfinite(value):
            return invalid(f"target_properties[{i}]", f"{name} = {value} is not finite")
        seen.add(name)
    return None

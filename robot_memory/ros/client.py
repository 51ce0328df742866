"""GroundingClient: what a planner node uses to ask robot_memory for grounding.

    client = GroundingClient(node)                      # any rclpy node
    result = client.query("manipulation.grasp", "glass_cup", "sim_relaxed",
                          intent_id="intent-42")        # blocks up to timeout_s
    if result.ok:
        prompt = format_grounding_block(result.facts) + prompt
        force = result.recommended_parameters().get("force_n")  # the skill fact's
    else:
        ...  # result.reason_code: no_fact, only_candidates, contested, stale, ...

`query` waits on a future, so the node must be spun by another thread (a
MultiThreadedExecutor or a background spin); `query_async` returns the future.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field

from rclpy.node import Node

from robot_memory.msg import KeyValue
from robot_memory.srv import GroundingQuery

STATUS_NAMES = {GroundingQuery.Response.OK: "OK", GroundingQuery.Response.ABSTAIN: "ABSTAIN",
                GroundingQuery.Response.IDENTITY_UNVERIFIED: "IDENTITY_UNVERIFIED",
                GroundingQuery.Response.INVALID_REQUEST: "INVALID_REQUEST",
                GroundingQuery.Response.ANALOGY: "ANALOGY",
                GroundingQuery.Response.PRIOR: "PRIOR"}
REASON_TIMEOUT = "timeout"
SKILL_SUCCESS_RATE = "skill_success_rate"
REASON_UNAVAILABLE = "service_unavailable"


@dataclass(frozen=True)
class GroundingResult:
    """Facts to ground on, or why there are none. `ok` is True only for status OK."""

    status: str
    reason_code: str = ""
    reason: str = ""
    identity_hash: str = ""
    consultation_id: str = ""
    facts: tuple = field(default_factory=tuple)
    # robot_memory/Analogy messages, with status ANALOGY only (ask with allow_analogies).
    analogies: tuple = field(default_factory=tuple)
    # robot_memory/Prior messages, with status PRIOR, or beside OK (ask with allow_priors).
    priors: tuple = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """True only for status OK (facts to use); ABSTAIN, ANALOGY, PRIOR and the rest
        are False: an analogy or a prior is not this robot's knowledge of the target."""
        return self.status == "OK"

    def skill_fact(self):
        """The skill_success_rate fact of the answer (the highest ranked, when the request
        left the environment open and several environments have one), or None. The
        answer's first fact may be another kind: a context fact such as the target's mass
        ranks above it when its confidence is higher."""
        return next((f for f in self.facts if f.kind == SKILL_SUCCESS_RATE), None)

    def recommended_parameters(self) -> dict[str, float]:
        """The skill fact's recommended parameters by name, e.g. {"force_n": 25.0}; empty
        when the answer has no skill fact (it is not OK, or the request asked for other
        kinds only)."""
        fact = self.skill_fact()
        return {} if fact is None else {kv.key: kv.value for kv in fact.recommended_parameters}


class GroundingClient:
    """A planner's handle on the `ground` service of a node it owns. Never raises for
    an absent or slow server: `query` answers UNAVAILABLE or TIMEOUT instead."""

    def __init__(self, node: Node, service_name: str = "ground", timeout_s: float = 1.0):
        self._node = node
        self._client = node.create_client(GroundingQuery, service_name)
        self.timeout_s = timeout_s

    @property
    def service_name(self) -> str:
        """The service's resolved name, e.g. /robot/ground."""
        return self._client.service_name

    def service_is_ready(self) -> bool:
        """True once the service is discovered; never waits."""
        return self._client.service_is_ready()

    def wait_for_service(self, timeout_s: float) -> bool:
        """True once the service is discovered, False after `timeout_s` seconds."""
        return self._client.wait_for_service(timeout_sec=timeout_s)

    def query_async(self, skill_id: str, target_class: str = "", environment: str = "", *,
                    zone: str = "", fact_kinds=(), min_confidence: float = 0.0,
                    max_results: int = 0,
                    intent_id: str = "", allow_analogies: bool = False,
                    target_properties: dict[str, float] | None = None,
                    max_analogies: int = 0, allow_priors: bool = False):
        """Send a GroundingQuery and return rclpy's future (spin the node to complete it).
        `allow_analogies` with `target_properties` (e.g. {"mass_kg": 0.31}): see
        docs/analogies.md; `allow_priors`: docs/priors.md."""
        request = GroundingQuery.Request(
            skill_id=skill_id, target_class=target_class, environment=environment, zone=zone,
            fact_kinds=list(fact_kinds), min_confidence=float(min_confidence),
            max_results=int(max_results), requester=self._node.get_fully_qualified_name(),
            intent_id=intent_id, allow_analogies=bool(allow_analogies),
            target_properties=[KeyValue(key=k, value=float(v))
                               for k, v in (target_properties or {}).items()],
            max_analogies=int(max_analogies), allow_priors=bool(allow_priors))
        return self._client.call_async(request)

    def query(self, skill_id: str, target_class: str = "", environment: str = "",
              **kwargs) -> GroundingResult:
        """Ask and wait up to `timeout_s` (the node must be spun by another thread, e.g. a
        MultiThreadedExecutor). Returns UNAVAILABLE or TIMEOUT results rather than
        raising; keyword arguments are those of `query_async`."""
        # Not yet discovered (just started) is not unavailable: wait within the timeout.
        if not self._client.service_is_ready() and \
                not self._client.wait_for_service(timeout_sec=self.timeout_s):
            return GroundingResult("UNAVAILABLE", REASON_UNAVAILABLE,
                                   f"service {self._client.srv_name} is not available")
        future = self.query_async(skill_id, target_class, environment, **kwargs)
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(self.timeout_s):
            future.cancel()
            return GroundingResult("TIMEOUT", REASON_TIMEOUT,
                                   f"no answer within {self.timeout_s} s")
        response = future.result()
        return GroundingResult(STATUS_NAMES.get(response.status, str(response.status)),
                               response.reason_code, response.reason, response.identity_hash,
                               response.consultation_id, tuple(response.facts),
                               tuple(response.analogies), tuple(response.priors))


def _number(value: float) -> str:
    return f"{value:g}"


def _q(band: dict, name: str) -> float:
    """A quartile of a band; its median when an operator's band gives none."""
    value = band.get(name)
    return band["median"] if value is None else value


def _describe(fact, value_json: str) -> list[str]:
    """The parts of one fact a planner's prompt needs, by kind (fact_schemas.py says
    what each kind's value holds); none for a value that does not hold them."""
    try:
        return _parts(fact, json.loads(value_json))
    except Exception:  # an ill-shaped value costs its own parts only
        return []


def _parts(fact, value: dict) -> list[str]:
    if fact.kind == "skill_success_rate":
        return [f"recommended_{kv.key} = {_number(kv.value)}"
                for kv in fact.recommended_parameters] + (
                    [f"success_rate = {fact.success_rate:.2f}"] if fact.has_success_rate else [])
    if fact.kind == "interaction_pattern":
        bands = [f"{name} {_number(_q(band, 'q1'))}-{_number(_q(band, 'q3'))}"
                 for name, band in (value.get("failure_parameters") or {}).items()]
        return [f"fails by {value['failure_reason']} in {value['share_of_failures']:.0%} of "
                "failures" + (f" (at {', '.join(bands)})" if bands else "")]
    if fact.kind == "object_property":
        return [f"{value['property']} = {_number(value['band']['median'])} (median)"]
    if fact.kind == "zone_risk":
        return [f"failure_rate = {value['failure_rate']:.2f}"]
    return []


def format_grounding_block(facts) -> str:
    """The prompt grounding block of the paper "Episodic-to-Semantic Consolidation
    Without Identity Drift", one entry per fact, e.g.
    'known facts for this robot: manipulation.grasp + glass_cup + sim_relaxed:
    recommended_force_n = 25, success_rate = 0.75, confidence = 0.61, n_observations = 16'."""
    if not facts:
        return "known facts for this robot: none"
    entries = []
    for fact in facts:
        parts = _describe(fact, fact.value_json)
        parts += [f"confidence = {fact.confidence:.2f}",
                  f"n_observations = {fact.n_observations}"]
        entries.append(f"{fact.key}: " + ", ".join(parts))
    return "known facts for this robot: " + "; ".join(entries)


def format_analogy_block(target_class: str, analogies) -> str:
    """The analogies of an ANALOGY answer as a prompt block that says what they are:
    facts of other targets, e.g. 'no facts for this robot about glass_jar; similar
    known targets (analogies, not knowledge of glass_jar): glass_cup, distance 0.21 on
    mass_kg: manipulation.grasp + glass_cup + sim_relaxed: recommended_force_n = 25, ...'."""
    if not analogies:
        return f"no facts for this robot about {target_class}; no similar known target"
    entries = []
    for analogy in analogies:
        compared = ", ".join(p.name for p in analogy.properties)
        lent = "; ".join(
            f"{fact.key}: " + ", ".join(_describe(fact, fact.value_json) +
                                        [f"confidence = {fact.confidence:.2f}",
                                         f"n_observations = {fact.n_observations}"])
            for fact in analogy.facts)
        entries.append(f"{analogy.target_class}, distance {analogy.distance:.2f} on "
                       f"{compared}: {lent}")
    return (f"no facts for this robot about {target_class}; similar known targets "
            f"(analogies, not knowledge of {target_class}): " + " | ".join(entries))


def format_prior_block(target_class: str, priors) -> str:
    """The priors of an answer as a prompt block that says whose they are, e.g.
    'fleet priors for glass_cup (robots of the same embodiment, not this robot's
    evidence): manipulation.grasp + glass_cup + sim_relaxed: blended_success_rate = 0.80
    (fleet 16/20, own 0/0, own share 0.00); arm-01: recommended_force_n = 25'."""
    if not priors:
        return f"no fleet priors for {target_class}"
    entries = []
    for prior in priors:
        head = (f"{prior.skill_id} + {prior.target_class} + {prior.environment}: "
                f"blended_success_rate = {prior.blended_success_rate:.2f} (fleet "
                f"{prior.prior_successes}/{prior.prior_n}, own {prior.own_successes}/"
                f"{prior.own_n}, own share {prior.own_share:.2f})")
        sources = "; ".join(
            f"{source.agent_id or source.identity_hash[:12]}: " +
            ", ".join(_describe(source.fact, source.fact.value_json))
            for source in prior.sources)
        entries.append(f"{head}; {sources}")
    return (f"fleet priors for {target_class} (robots of the same embodiment, not this "
            "robot's evidence): " + " | ".join(entries))

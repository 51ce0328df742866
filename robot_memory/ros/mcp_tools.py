"""The MCP tools' backend: every tool asks the running stack, over DDS, as a planner would.

`ground` goes through the grounding server's GroundingQuery service (so the server
audits it, as any consultation); `explain_fact` and `explain_action` through its
ExplainFact service; `consolidate_preview` through the consolidator's Consolidate service
with dry_run set and no credential (a request that could apply is never built); `facts`
is the consolidator's latched `facts` snapshot of the identity the verifier published as
VERIFIED on `identity_status`; `replay_facts` reads the log of that identity in the store
the verifier checked, with the running consolidator's rules (planners/replay.py).

When the stack is down, or its identity is not verified, a tool answers with that reason
(planners/answers.py) and reads nothing around it.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import rclpy
from rcl_interfaces.srv import GetParameters
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import parameter_value_to_python

from robot_memory.consolidation import RulesConfig
from robot_memory.msg import IdentityStatus, SemanticFactArray
from robot_memory.planners import answers
from robot_memory.planners.mcp_server import serve
from robot_memory.planners.replay import replay_facts
from robot_memory.ros.client import GroundingClient
from robot_memory.ros.qos import FACTS_QOS, IDENTITY_STATUS_QOS
from robot_memory.srv import Consolidate, ExplainFact

IDENTITY_STATES = {IdentityStatus.UNVERIFIED: "UNVERIFIED", IdentityStatus.VERIFIED: "VERIFIED",
                   IdentityStatus.MISMATCH: "MISMATCH",
                   IdentityStatus.INVALID_MANIFEST: "INVALID_MANIFEST",
                   IdentityStatus.STORE_CORRUPTED: "STORE_CORRUPTED"}
INACTIVE = "inactive:"  # how a node of the stack that is not serving begins its reason


def fact_dict(fact) -> dict[str, Any]:
    """A SemanticFact message's fields as answers.fact_line reads them."""
    try:
        value = json.loads(fact.value_json) if fact.value_json else None
    except ValueError:
        value = fact.value_json
    return {"fact_id": fact.fact_id, "kind": fact.kind, "key": fact.key,
            "status": fact.status, "confidence": fact.confidence,
            "n_observations": fact.n_observations,
            "success_rate": fact.success_rate if fact.has_success_rate else None,
            "recommended_parameters": {kv.key: kv.value for kv in fact.recommended_parameters},
            "value": value}


def _analogy_dict(analogy) -> dict[str, Any]:
    return {"target_class": analogy.target_class, "distance": analogy.distance,
            "properties": [p.name for p in analogy.properties],
            "facts": [fact_dict(f) for f in analogy.facts]}


def _prior_dict(prior) -> dict[str, Any]:
    return {name: getattr(prior, name) for name in (
        "skill_id", "target_class", "environment", "prior_n", "prior_successes", "own_n",
        "own_successes", "blended_success_rate")}


class StackTools:
    """The Backend of planners/mcp_server.py on one rclpy node, which another thread spins.
    Each call waits at most `timeout_s` for discovery and as long again for the answer."""

    def __init__(self, node: Node, timeout_s: float = 5.0, db_url: str = ""):
        self._node = node
        self.timeout_s = timeout_s
        self.db_url = db_url
        self._grounding = GroundingClient(node, "ground", timeout_s)
        self._explain = node.create_client(ExplainFact, "explain")
        self._consolidate = node.create_client(Consolidate, "consolidate")
        self._parameters = node.create_client(GetParameters, "consolidator/get_parameters")
        self._lock = threading.Lock()
        self._identity: IdentityStatus | None = None
        self._facts: SemanticFactArray | None = None
        self._identity_topic = node.create_subscription(
            IdentityStatus, "identity_status", self._on_identity, IDENTITY_STATUS_QOS)
        self._facts_topic = node.create_subscription(SemanticFactArray, "facts",
                                                     self._on_facts, FACTS_QOS)

    def _on_identity(self, msg: IdentityStatus) -> None:
        with self._lock:
            self._identity = msg

    def _on_facts(self, msg: SemanticFactArray) -> None:
        with self._lock:
            self._facts = msg

    # -- calls ------------------------------------------------------------------------

    def _call(self, client, request, what: str):
        """(response, None), or (None, the text of why there is none)."""
        if not client.service_is_ready() and \
                not client.wait_for_service(timeout_sec=self.timeout_s):
            return None, answers.unavailable(what, f"service {client.service_name} is not "
                                             "available (is the stack running?)")
        future = client.call_async(request)
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(self.timeout_s):
            future.cancel()
            return None, answers.unavailable(what, f"no answer from {client.service_name} within "
                                             f"{self.timeout_s:g} s")
        return future.result(), None

    def _wait(self, predicate, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def _verified(self, what: str) -> tuple[IdentityStatus | None, str | None]:
        """The verifier's VERIFIED status, or the text of why there is none: no verifier
        publishing (the stack is down), or a state other than VERIFIED."""
        topic = self._identity_topic.topic_name
        alive = self._wait(lambda: self._node.count_publishers(topic) > 0 and
                           self._identity is not None, self.timeout_s)
        if not alive:
            return None, answers.unavailable(what, f"no identity status on {topic} within "
                                             f"{self.timeout_s:g} s (is the stack running?)")
        with self._lock:
            status = self._identity
        if status.state != IdentityStatus.VERIFIED:
            state = IDENTITY_STATES.get(status.state, str(status.state))
            return None, answers.refused(what, f"identity {state}: {status.reason}")
        return status, None

    # -- the tools ----------------------------------------------------------------------

    def ground(self, skill_id, target_class, environment, zone, fact_kinds, min_confidence,
               max_results, intent_id, allow_analogies, target_properties,
               allow_priors) -> str:
        result = self._grounding.query(
            skill_id, target_class, environment, zone=zone, fact_kinds=fact_kinds,
            min_confidence=min_confidence, max_results=max_results, intent_id=intent_id,
            allow_analogies=allow_analogies, target_properties=target_properties,
            allow_priors=allow_priors)
        if result.status == answers.UNAVAILABLE:
            return answers.unavailable("ground", f"service {self._grounding.service_name} is "
                                       "not available (is the stack running?)")
        answer = {"status": result.status, "reason_code": result.reason_code,
                  "reason": result.reason, "identity_hash": result.identity_hash,
                  "consultation_id": result.consultation_id,
                  "facts": [fact_dict(f) for f in result.facts],
                  "analogies": [_analogy_dict(a) for a in result.analogies],
                  "priors": [_prior_dict(p) for p in result.priors]}
        return answers.render_ground(answer, skill_id, target_class, environment)

    def explain_fact(self, fact_id: int, kind: str, key: str) -> str:
        response, problem = self._call(
            self._explain, ExplainFact.Request(fact_id=int(fact_id), kind=kind, key=key),
            "explain_fact")
        if problem:
            return problem
        if not response.found and response.reason.startswith(INACTIVE):
            return answers.refused("explain_fact", response.reason)
        return answers.render_explain_fact(response.found, response.reason,
                                           response.explanation_text)

    def explain_action(self, intent_id: str) -> str:
        request = ExplainFact.Request(intent_id=intent_id)
        response, problem = self._call(self._explain, request, "explain_action")
        if problem:
            return problem
        if not response.found and response.reason.startswith(INACTIVE):
            return answers.refused("explain_action", response.reason)
        return answers.render_explain_action(response.found, response.reason,
                                             response.explanation_text, intent_id)

    def facts(self, kind: str) -> str:
        status, problem = self._verified("facts")
        if problem:
            return problem
        identity = status.computed_hash
        topic = self._facts_topic.topic_name
        if not self._wait(lambda: self._facts is not None and
                          self._facts.identity_hash == identity, self.timeout_s):
            return answers.unavailable("facts", f"no snapshot of identity {identity} on "
                                       f"{topic} within {self.timeout_s:g} s")
        with self._lock:
            snapshot = self._facts
        facts = [fact_dict(f) for f in snapshot.facts if not kind or f.kind == kind]
        return answers.render_facts(identity, snapshot.run_event_id, facts)

    def consolidate_preview(self) -> str:
        response, problem = self._call(self._consolidate, Consolidate.Request(dry_run=True),
                                       "consolidate_preview")
        if problem:
            return problem
        return answers.render_preview(response.success, response.reason, response.diff,
                                      response.events_read, response.facts_touched)

    def _rule_settings(self) -> tuple[dict[str, Any] | None, str | None]:
        """The running consolidator's rule parameters by name."""
        names = sorted(RulesConfig.__dataclass_fields__)
        response, problem = self._call(self._parameters, GetParameters.Request(names=names),
                                       "replay_facts")
        if problem:
            return None, problem
        return {name: parameter_value_to_python(value)
                for name, value in zip(names, response.values)
                if value.type != 0}, None  # 0: PARAMETER_NOT_SET (not declared)

    def replay_facts(self, until_event_id: int, until_time_s: float) -> str:
        status, problem = self._verified("replay_facts")
        if problem:
            return problem
        settings, problem = self._rule_settings()
        if problem:
            return problem
        return replay_facts(self.db_url, status.computed_hash, status.store_id,
                            until_event_id, until_time_s, settings)


def run_server(namespace: str, timeout_s: float, db_url: str, transport: str, host: str,
               port: int) -> None:
    """`robot-memory mcp`: one node in `namespace`, spun in a background thread, behind
    the MCP server until the host closes stdin (stdio) or the process is stopped (http).
    On stdio, stdout is the protocol's: rclpy logs to stderr."""
    rclpy.init(args=[])
    executor = MultiThreadedExecutor(num_threads=2)
    node = rclpy.create_node("robot_memory_mcp", namespace=namespace or "/")
    spinning = threading.Thread(target=executor.spin, name="mcp_ros", daemon=True)
    try:
        tools = StackTools(node, timeout_s=timeout_s, db_url=db_url)
        executor.add_node(node)
        spinning.start()
        serve(tools, transport, host, port)
    finally:
        # In this order, so that no rclpy object outlives the context it was made in.
        executor.shutdown()
        if spinning.is_alive():
            spinning.join()
        node.destroy_node()
        rclpy.try_shutdown()

"""GroundBehaviour: a py_trees leaf that asks robot_memory's `ground` without blocking.

    leaf = GroundBehaviour("ground grasp", node, "manipulation.grasp", "glass_cup",
                           "sim_relaxed", intent_id="pick-7")
    tree = py_trees.trees.BehaviourTree(py_trees.composites.Sequence(
        "pick", memory=True, children=[leaf, Grasp()]))
    # the node is spun by another thread (or spin_once between ticks)

`initialise` sends the GroundingQuery (once the service is discovered: until then, or
until `service_timeout_s` has passed, the leaf is RUNNING); `update` answers RUNNING
until the answer arrives, then SUCCESS for OK (and for ANALOGY or PRIOR when `accept`
names them) and FAILURE for any other status, or when the service is not found or does
not answer within `answer_timeout_s`. Each outcome is written to the blackboard under
`key_prefix` (planners/leaf.py lists the keys). py_trees is an optional dependency
(requirements/python.txt; docs/planners.md).
"""

from __future__ import annotations

import time

try:
    import py_trees
except ImportError as exc:  # optional: only this leaf needs it
    raise ImportError(f"robot_memory.ros.bt_ground needs py_trees ({exc}); install the "
                      "py_trees line of requirements/python.txt (docs/planners.md)") from exc

from robot_memory.planners.leaf import DEFAULT_KEY_PREFIX, KEYS, blackboard_key, success_statuses
from robot_memory.ros.client import (REASON_TIMEOUT, REASON_UNAVAILABLE, STATUS_NAMES,
                                     GroundingClient, GroundingResult)


class GroundBehaviour(py_trees.behaviour.Behaviour):
    """Ask `ground` about one skill on one target; SUCCESS or FAILURE by the answer.
    Keyword arguments after `environment` are GroundingClient.query_async's."""

    def __init__(self, name: str, node, skill_id: str, target_class: str = "",
                 environment: str = "", *, accept=(), service_name: str = "ground",
                 service_timeout_s: float = 5.0, answer_timeout_s: float = 5.0,
                 key_prefix: str = DEFAULT_KEY_PREFIX, **query):
        super().__init__(name)
        self.successes = success_statuses(accept)
        self.skill_id, self.target_class, self.environment = skill_id, target_class, environment
        self.query = query
        self.service_timeout_s, self.answer_timeout_s = service_timeout_s, answer_timeout_s
        self.client = GroundingClient(node, service_name, answer_timeout_s)
        self.keys = {name: blackboard_key(key_prefix, name) for name in KEYS}
        self.blackboard = self.attach_blackboard_client(name=name)
        for key in self.keys.values():
            self.blackboard.register_key(key=key, access=py_trees.common.Access.WRITE)
        self._future = None
        self._started = self._sent = 0.0
        self.result: GroundingResult | None = None

    def initialise(self) -> None:
        """Start a new question: send it now if the service is known, else on a later tick."""
        self._future, self.result = None, None
        self._started = time.monotonic()
        self._send_if_ready()

    def _send_if_ready(self) -> None:
        if self.client.service_is_ready():
            self._future = self.client.query_async(self.skill_id, self.target_class,
                                                   self.environment, **self.query)
            self._sent = time.monotonic()

    def update(self) -> py_trees.common.Status:
        now = time.monotonic()
        if self._future is None:
            self._send_if_ready()
        if self._future is None:
            if now - self._started < self.service_timeout_s:
                return py_trees.common.Status.RUNNING
            return self._finish(GroundingResult(
                "UNAVAILABLE", REASON_UNAVAILABLE,
                f"service {self.client.service_name} not available within "
                f"{self.service_timeout_s:g} s"))
        if not self._future.done():
            if now - self._sent < self.answer_timeout_s:
                return py_trees.common.Status.RUNNING
            self._future.cancel()
            return self._finish(GroundingResult(
                "TIMEOUT", REASON_TIMEOUT, f"no answer within {self.answer_timeout_s:g} s"))
        response = self._future.result()
        return self._finish(GroundingResult(
            STATUS_NAMES.get(response.status, str(response.status)), response.reason_code,
            response.reason, response.identity_hash, response.consultation_id,
            tuple(response.facts), tuple(response.analogies), tuple(response.priors)))

    def _finish(self, result: GroundingResult) -> py_trees.common.Status:
        self.result, self._future = result, None
        values = {"status": result.status, "reason_code": result.reason_code,
                  "reason": result.reason,
                  "recommended_parameters": result.recommended_parameters(),
                  "consultation_id": result.consultation_id}
        for name, key in self.keys.items():
            self.blackboard.set(key, values[name], overwrite=True)
        self.feedback_message = f"{result.status} {result.reason_code}".strip()
        return (py_trees.common.Status.SUCCESS if result.status in self.successes
                else py_trees.common.Status.FAILURE)

    def terminate(self, new_status: py_trees.common.Status) -> None:
        """Interrupted (INVALID) while waiting: the answer is no longer wanted."""
        if new_status == py_trees.common.Status.INVALID and self._future is not None:
            self._future.cancel()
            self._future = None

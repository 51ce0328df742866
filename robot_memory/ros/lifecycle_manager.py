"""Bring the memory nodes to ACTIVE, for the verifier, once the identity is verified.

Polls each managed node's lifecycle state (`<node>/get_state`) and asks for the next
transition (`<node>/change_state`): unconfigured -> configure, inactive -> activate.
Polling keeps going (more slowly once all are active), so a node that starts late or
is restarted (respawn) is activated too. A transition the manager did not ask for (seen on
`<node>/transition_event`) is an operator's: that node is held where it was left until
`manage_nodes` RESUME (robot_memory.operation.lifecycle_policy decides). Only asynchronous calls:
the verifier's single thread never blocks.
"""

from __future__ import annotations

import time
from typing import Callable

from lifecycle_msgs.msg import Transition, TransitionEvent
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from robot_memory.operation.lifecycle_policy import FINALIZED, BringUpPolicy

TRANSITION_IDS = {"configure": Transition.TRANSITION_CONFIGURE,
                  "activate": Transition.TRANSITION_ACTIVATE,
                  "deactivate": Transition.TRANSITION_DEACTIVATE}

CALL_TIMEOUT_S = 5.0
# Once every node is active, each is asked at this period instead: every get_state wakes
# the asked node's executor and costs it some CPU (docs/performance.md, "Why the code is
# shaped this way"), and a restarted node is still found, only up to this much later.
WATCH_PERIOD_S = 2.0
# What rcl_lifecycle publishes transition events with (reliable, keep last 10).
TRANSITION_EVENT_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


class LifecycleManager:
    def __init__(self, node: Node, node_names: list[str], period_s: float = 0.5,
                 hold_all: Callable[[], str] = lambda: ""):
        """hold_all(): why no node may be brought up now (empty: they may)."""
        self._node = node
        self._hold_all = hold_all
        self.held_all = ""  # the reason every node is held, while it is
        self.policy = BringUpPolicy(node_names)
        self._get = {name: node.create_client(GetState, f"{name}/get_state")
                     for name in node_names}
        self._change = {name: node.create_client(ChangeState, f"{name}/change_state")
                        for name in node_names}
        for name in node_names:
            node.create_subscription(
                TransitionEvent, f"{name}/transition_event",
                lambda msg, n=name: self._on_transition_event(n, msg), TRANSITION_EVENT_QOS)
        # Node name -> when its call started; a node that dies mid-call must not stay busy.
        self._busy: dict[str, float] = {}
        self.states: dict[str, str] = {name: "unknown" for name in node_names}
        self._logged_holds: dict[str, str] = {}
        self._timer = node.create_timer(period_s, self._tick,
                                        clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._asked_at = -float("inf")  # when the nodes were last asked
        self.stopped = False

    @property
    def node_names(self) -> list[str]:
        return self.policy.node_names

    def stop(self) -> None:
        """Activate nothing more (the nodes deactivate themselves on the new status)."""
        self.stopped = True
        self._node.destroy_timer(self._timer)

    def pause(self, names: list[str]) -> None:
        self.policy.pause(names)
        self._log_hold_changes()

    def resume(self, names: list[str]) -> None:
        self.policy.resume(names)
        self._log_hold_changes()

    def unavailable(self, names: list[str]) -> dict[str, str]:
        """Those of `names` that cannot be brought up now, and why: finalized (its process
        exits; a respawn brings it back) or not running (no `get_state` service)."""
        missing = {}
        for name in names:
            if not self._get[name].service_is_ready():
                missing[name] = "not running (no get_state service)"
            elif self.states.get(name) == FINALIZED:
                missing[name] = "finalized by a lifecycle shutdown"
        return missing

    def _on_transition_event(self, name: str, msg: TransitionEvent) -> None:
        self.policy.on_transition_event(name, msg.start_state.label, msg.goal_state.label,
                                        time.monotonic())
        self._log_hold_changes()

    def _log_hold_changes(self) -> None:
        """One log line when a node becomes held (and why) or is managed again."""
        holds = self.policy.holds
        for name in self.node_names:
            before, now = self._logged_holds.get(name), holds.get(name)
            if before == now:
                continue
            if now is None:
                self._node.get_logger().info(f"{name} is managed again")
            else:
                self._node.get_logger().warning(
                    f"{name} held: {now}; manage_nodes RESUME hands it back")
        self._logged_holds = dict(holds)

    def _tick(self) -> None:
        held = self._hold_all()
        if held != self.held_all:
            self.held_all = held
            if held:
                self._node.get_logger().warning(f"holding the memory nodes: {held}")
            else:
                self._node.get_logger().info("bringing the memory nodes up")
        if held:
            return
        now = time.monotonic()
        all_active = all(state == "active" for state in self.states.values())
        if all_active and not self._busy and now - self._asked_at < WATCH_PERIOD_S:
            return
        self._asked_at = now
        for name in self._get:
            self._ask(name, now)

    def _ask(self, name: str, now: float) -> None:
        started = self._busy.get(name)
        client = self._get[name]
        if (started is not None and now - started < CALL_TIMEOUT_S) \
                or not client.service_is_ready():
            return
        self._busy[name] = now
        future = client.call_async(GetState.Request())
        future.add_done_callback(lambda f, n=name: self._on_state(n, f))

    def _on_state(self, name: str, future) -> None:
        response = future.result()
        if response is None or self.stopped:
            self._busy.pop(name, None)
            return
        state = response.current_state
        if self.states.get(name) != state.label:
            self._node.get_logger().info(f"{name} is {state.label}")
        self.states[name] = state.label
        transition = self.policy.next_transition(name, state.label)
        self._log_hold_changes()
        if transition is None or not self._change[name].service_is_ready():
            self._busy.pop(name, None)
            return
        self.policy.requesting(name, transition, time.monotonic())
        request = ChangeState.Request(transition=Transition(id=TRANSITION_IDS[transition]))
        done = self._change[name].call_async(request)
        done.add_done_callback(lambda f, n=name: self._on_changed(n, f))

    def _on_changed(self, name: str, future) -> None:
        """A transition that went through is followed by the next one at once (configure,
        then activate), not a tick later."""
        self._busy.pop(name, None)
        response = future.result()
        if response is not None and response.success and not self.stopped:
            self._ask(name, time.monotonic())

"""Bring the memory nodes to ACTIVE, for the verifier, once the identity is verified.

Polls each managed node's lifecycle state (`<node>/get_state`) and asks for the next
transition (`<node>/change_state`): unconfigured -> configure, inactive -> activate.
Polling keeps going, so a node that starts late or is restarted (respawn) is
activated too. Only asynchronous calls: the verifier's single thread never blocks.
"""

from __future__ import annotations

import time

from lifecycle_msgs.msg import State, Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.clock import Clock, ClockType
from rclpy.node import Node

NEXT_TRANSITION = {State.PRIMARY_STATE_UNCONFIGURED: Transition.TRANSITION_CONFIGURE,
                   State.PRIMARY_STATE_INACTIVE: Transition.TRANSITION_ACTIVATE}

CALL_TIMEOUT_S = 5.0


class LifecycleManager:
    def __init__(self, node: Node, node_names: list[str], period_s: float = 0.5):
        self._node = node
        self._get = {name: node.create_client(GetState, f"{name}/get_state")
                     for name in node_names}
        self._change = {name: node.create_client(ChangeState, f"{name}/change_state")
                        for name in node_names}
        # Node name -> when its call started; a node that dies mid-call must not stay busy.
        self._busy: dict[str, float] = {}
        self.states: dict[str, str] = {name: "unknown" for name in node_names}
        self._timer = node.create_timer(period_s, self._tick,
                                        clock=Clock(clock_type=ClockType.STEADY_TIME))

    def stop(self) -> None:
        """Activate nothing more (the nodes deactivate themselves on the new status)."""
        self._node.destroy_timer(self._timer)

    def _tick(self) -> None:
        now = time.monotonic()
        for name, client in self._get.items():
            started = self._busy.get(name)
            if (started is not None and now - started < CALL_TIMEOUT_S) \
                    or not client.service_is_ready():
                continue
            self._busy[name] = now
            future = client.call_async(GetState.Request())
            future.add_done_callback(lambda f, n=name: self._on_state(n, f))

    def _on_state(self, name: str, future) -> None:
        response = future.result()
        if response is None:
            self._busy.pop(name, None)
            return
        state = response.current_state
        if self.states.get(name) != state.label:
            self._node.get_logger().info(f"{name} is {state.label}")
        self.states[name] = state.label
        transition = NEXT_TRANSITION.get(state.id)
        if transition is None or not self._change[name].service_is_ready():
            self._busy.pop(name, None)
            return
        request = ChangeState.Request(transition=Transition(id=transition))
        done = self._change[name].call_async(request)
        done.add_done_callback(lambda f, n=name: self._busy.pop(n, None))

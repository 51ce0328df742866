"""The memory nodes are ROS 2 lifecycle nodes, brought up by manifest_verifier.

They start unconfigured and write or serve nothing. The verifier configures and
activates them only once the identity and the store are verified; `configure` fails
until this node has itself seen VERIFIED on `identity_status` (the identity it then
uses is that one, never a request field). A later status that withdraws the identity
deactivates the node at once; a human must act before it serves again.
"""

from __future__ import annotations

from rclpy.service import Service
from rclpy.subscription import Subscription
from rclpy.timer import Timer
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from robot_memory.ros.identity_gate import IdentityGate
from robot_memory.ros.spin import stop_process

SUCCESS, FAILURE = TransitionCallbackReturn.SUCCESS, TransitionCallbackReturn.FAILURE


class ManagedMemoryNode(LifecycleNode):
    """Subclasses implement start(identity_hash) and stop(); entities they create in
    start() and list in self.active_entities are destroyed again on deactivation."""

    def __init__(self, node_name: str, gate_callback_group=None, **kwargs):
        super().__init__(node_name, **kwargs)
        self.identity_hash: str | None = None
        self.active_entities: list = []
        self.gate = IdentityGate(self, self._on_verified, self._on_revoked,
                                 callback_group=gate_callback_group)

    # What the subclass does when it goes active / stops being active.
    def start(self, identity_hash: str) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        pass

    @property
    def inactive_reason(self) -> str:
        return self.gate.reason or "waiting for manifest_verifier to activate this node"

    def _on_verified(self, identity_hash: str) -> None:
        pass  # configure/activate come from the verifier; the gate only remembers the hash

    def _on_revoked(self) -> None:
        if self.identity_hash is not None:
            self.get_logger().error(f"deactivating: {self.gate.reason}")
            self.trigger_deactivate()

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self.gate.identity_hash is None:
            self.get_logger().warning(f"cannot configure yet: {self.gate.reason}")
            return FAILURE
        return SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        identity_hash = self.gate.identity_hash
        if identity_hash is None:
            self.get_logger().error(f"refusing to activate: {self.gate.reason}")
            return FAILURE
        try:
            self.start(identity_hash)
        except Exception as exc:  # the store may be unreachable: stay inactive, say why
            self.get_logger().error(f"activation failed: {exc}")
            self._stop_all()
            return FAILURE
        self.identity_hash = identity_hash
        self.gate.reason = ""
        self.get_logger().info(f"active for verified identity {identity_hash}")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_all()
        if not self.gate.reason:
            self.gate.reason = "deactivated by a lifecycle transition"
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        return SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Finalized is for good (no transition leads out of it), so the process exits,
        cleanly, once this transition has been answered: a respawn (launch's respawn=True,
        a supervisor) brings the node back unconfigured and the verifier activates it. In
        one process the other three nodes stop with it, as after a Ctrl-C."""
        self._stop_all()
        if stop_process():
            self.get_logger().warning("finalized by a lifecycle shutdown: the process exits "
                                      "(a respawn brings the node back)")
        return SUCCESS

    def _stop_all(self) -> None:
        self.identity_hash = None
        self.stop()
        for entity in self.active_entities:
            self.destroy_entity(entity)
        self.active_entities.clear()

    def destroy_entity(self, entity) -> None:
        if isinstance(entity, Subscription):
            self.destroy_subscription(entity)
        elif isinstance(entity, Timer):
            self.destroy_timer(entity)
        elif isinstance(entity, Service):
            self.destroy_service(entity)

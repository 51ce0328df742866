"""The memory nodes are ROS 2 lifecycle nodes, brought up by manifest_verifier.

They start unconfigured and write or serve nothing. The verifier configures and
activates them only once the identity and the store are verified; `configure` fails
until this node has itself seen VERIFIED on `identity_status` (the identity it then
uses is that one, never a request field). A later status that withdraws the identity
deactivates the node at once; a human must act before it serves again.

Each transition does what ros2/demos' lifecycle_talker does, with rclpy's managed
entities (lifecycle publishers, ActiveTimer, the serving flag) switched by
LifecycleNode's own on_activate/on_deactivate:

  configure    acquire(identity_hash): open the store, build what serving needs
  activate     managed entities on, then start(identity_hash)
  deactivate   stop(), what start() listed in active_entities destroyed, entities off
  cleanup      release(): what acquire() built
  shutdown     deactivate and clean up, whatever the state; the process exits
  error        the same, without the exit: the node is back to unconfigured

acquire() and release() do nothing unless overridden.
"""

from __future__ import annotations

from typing import Callable

from rclpy.lifecycle import (LifecycleNode, LifecycleState, ManagedEntity,
                             SimpleManagedEntity, TransitionCallbackReturn)
from rclpy.service import Service
from rclpy.subscription import Subscription
from rclpy.timer import Timer

from robot_memory.operation.lifecycle_policy import SplitStack, split_stack_problem
from robot_memory.ros.identity_gate import IdentityGate
from robot_memory.ros.sim_clock import waiting_for_clock
from robot_memory.ros.spin import stop_process

SUCCESS, FAILURE = TransitionCallbackReturn.SUCCESS, TransitionCallbackReturn.FAILURE


class ActiveTimer(ManagedEntity):
    """A node timer that exists while the node is configured and fires only while it is
    active: created (cancelled) on configure, reset on activate, cancelled on deactivate,
    destroyed on cleanup, shutdown and error. Registered with the node once, for its
    life: rclpy offers no public way to take a managed entity back."""

    def __init__(self, node: LifecycleNode, period_s: float, callback: Callable[[], None],
                 **timer_options):
        self._create = lambda: node.create_timer(period_s, callback, **timer_options)
        self._destroy_timer = node.destroy_timer
        self._timer: Timer | None = None
        node.add_managed_entity(self)

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._destroy()  # a configure after an error that skipped cleanup
        self._timer = self._create()
        self._timer.cancel()  # the executor cannot run it before this returns
        return SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._timer is not None:
            self._timer.reset()  # first call one period from now, as a new timer would
        return SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._timer is not None:
            self._timer.cancel()
        return SUCCESS

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._destroy()
        return SUCCESS

    on_shutdown = on_cleanup
    on_error = on_cleanup

    def _destroy(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            self._destroy_timer(timer)


class ManagedMemoryNode(LifecycleNode):
    """Subclasses override the hooks they need: acquire(identity_hash) and release() for
    what the node holds while configured; start(identity_hash) and stop() for what it
    does beyond the managed entities when it goes active and stops being active.
    Entities start() creates and lists in self.active_entities are destroyed on
    deactivation (the logger's result subscriptions)."""

    def __init__(self, node_name: str, gate_callback_group=None, **kwargs):
        super().__init__(node_name, **kwargs)
        self.identity_hash: str | None = None  # the identity it is configured for
        self.active_entities: list = []
        # On while active; the services that answer in every state read it.
        self._serving = SimpleManagedEntity()
        self.add_managed_entity(self._serving)
        self.gate = IdentityGate(self, self._on_verified, self._on_revoked,
                                 callback_group=gate_callback_group)

    # -- the hooks ----------------------------------------------------------------------
    def _log(self, level: str, text: str) -> None:
        """Log `text` at `level` ("error", "warning", else info): the form the core's
        services take a logger in (ConsolidationService, ServedIndex, the logger)."""
        # One call site per severity: rclpy refuses a second severity from the same line.
        if level == "error":
            self.get_logger().error(text)
        elif level == "warning":
            self.get_logger().warning(text)
        else:
            self.get_logger().info(text)

    def acquire(self, identity_hash: str) -> None:
        """On configure: open the store, build the state serving needs."""

    def release(self) -> None:
        """On cleanup, shutdown and error: give back what acquire() took (idempotent)."""

    def require_verified_store(self, store) -> None:
        """Called by acquire() with the store it opened: raises SplitStack unless it is
        the store the verifier checked (a parameters file can give one node another
        database_url)."""
        problem = split_stack_problem(self.gate.store_id, store.store_id, store.url)
        if problem:
            raise SplitStack(problem)

    def start(self, identity_hash: str) -> None:
        """On activate, once the managed entities are on."""

    def stop(self) -> None:
        """On deactivate, shutdown and error, before the managed entities go off."""

    @property
    def serving(self) -> bool:
        """Active: the node writes and serves (its lifecycle publishers publish)."""
        return self._serving.is_activated

    @property
    def inactive_reason(self) -> str:
        return self.gate.reason or waiting_for_clock(self) or \
            "waiting for manifest_verifier to activate this node"

    # -- the identity gate ----------------------------------------------------------------
    def _on_verified(self, identity_hash: str) -> None:
        pass  # configure/activate come from the verifier; the gate only remembers the hash

    def _on_revoked(self) -> None:
        if self.serving:
            self.get_logger().error(f"deactivating: {self.gate.reason}")
            self.trigger_deactivate()

    # -- the transitions --------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        identity_hash = self.gate.identity_hash
        if identity_hash is None:
            self.get_logger().warning(f"cannot configure yet: {self.gate.reason}")
            return FAILURE
        try:
            self.acquire(identity_hash)
        except Exception as exc:  # the store may be unreachable: stay unconfigured, say why
            self.get_logger().error(f"configuration failed: {exc}")
            self._release()
            return FAILURE
        self.identity_hash = identity_hash
        configured = super().on_configure(state)  # the managed entities (ActiveTimers)
        if configured != SUCCESS:
            super().on_cleanup(state)
            self._release()
        return configured

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        identity_hash = self.gate.identity_hash
        if identity_hash is None:
            self.get_logger().error(f"refusing to activate: {self.gate.reason}")
            return FAILURE
        clock_wait = waiting_for_clock(self)  # the verifier's clock came first: not ours
        if clock_wait:
            self.get_logger().warning(f"refusing to activate: {clock_wait}")
            return FAILURE
        activated = super().on_activate(state)  # publishers, timers, the serving flag
        if activated != SUCCESS:
            self._switch_off(state)
            return activated
        try:
            self.start(identity_hash)
        except Exception as exc:  # the store may be unreachable: stay inactive, say why
            self.get_logger().error(f"activation failed: {exc}")
            self._switch_off(state)
            return FAILURE
        self.gate.reason = ""
        self.get_logger().info(f"active for verified identity {identity_hash}")
        return SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._switch_off(state)
        if not self.gate.reason:
            self.gate.reason = "deactivated by a lifecycle transition"
        return SUCCESS

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        super().on_cleanup(state)
        self._release()
        return SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Finalized is for good (no transition leads out of it), so the process exits,
        cleanly, once this transition has been answered: a respawn (launch's respawn=True,
        a supervisor) brings the node back unconfigured and the verifier activates it. In
        one process the other three nodes stop with it, as after a Ctrl-C."""
        self._switch_off(state)  # shutdown may come straight from active
        super().on_shutdown(state)
        self._release()
        if stop_process():
            self.get_logger().warning("finalized by a lifecycle shutdown: the process exits "
                                      "(a respawn brings the node back)")
        return SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        """A transition callback raised: let go of everything; SUCCESS leaves the node
        unconfigured, from where the verifier configures it again."""
        self.get_logger().error(f"a transition from {state.label} failed; unconfigured")
        self._switch_off(state)
        super().on_error(state)
        self._release()
        return SUCCESS

    def _switch_off(self, state: LifecycleState) -> None:
        """Nothing is published or served from here on, then the node's own stop()."""
        super().on_deactivate(state)
        self.stop()
        for entity in self.active_entities:
            self.destroy_entity(entity)
        self.active_entities.clear()

    def _release(self) -> None:
        self.identity_hash = None
        try:
            self.release()
        except Exception as exc:  # what is left is dropped with the node; say what failed
            self.get_logger().error(f"releasing the node's resources failed: {exc}")

    def destroy_entity(self, entity) -> None:
        if isinstance(entity, Subscription):
            self.destroy_subscription(entity)
        elif isinstance(entity, Timer):
            self.destroy_timer(entity)
        elif isinstance(entity, Service):
            self.destroy_service(entity)

"""ManagedMemoryNode's transitions in one process, on this distribution's rclpy: configure
acquires, activate switches the managed entities on (a lifecycle publisher, an
ActiveTimer, the serving flag), deactivate switches them off, cleanup releases, and a
revoked identity deactivates the node."""

import time

import pytest
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import TransitionCallbackReturn
from std_msgs.msg import String

from robot_memory.msg import IdentityStatus
from robot_memory.ros.managed_node import ActiveTimer, ManagedMemoryNode

SUCCESS = TransitionCallbackReturn.SUCCESS
TICK_S = 0.1


class Recorder(ManagedMemoryNode):
    """Records the hooks it is called with, and what was switched on at start()."""

    def __init__(self, fail_in: str = ""):
        super().__init__("managed_node_under_test")
        self.calls: list[tuple] = []
        self.ticks = 0
        self.fail_in = fail_in
        self.chatter = self.create_lifecycle_publisher(String, "chatter", 10)
        ActiveTimer(self, TICK_S, self._tick)

    def _tick(self) -> None:
        self.ticks += 1

    def acquire(self, identity_hash: str) -> None:
        self.calls.append(("acquire", identity_hash))
        if self.fail_in == "acquire":
            raise OSError("the store is unreachable")

    def release(self) -> None:
        self.calls.append(("release",))

    def start(self, identity_hash: str) -> None:
        self.calls.append(("start", self.chatter.is_activated, self.serving))
        if self.fail_in == "start":
            raise OSError("the store is unreachable")

    def stop(self) -> None:
        self.calls.append(("stop",))

    def hear(self, state: int, computed_hash: str = "h", reason: str = "") -> None:
        """What manifest_verifier would publish on identity_status."""
        self.gate._on_identity_status(IdentityStatus(state=state, computed_hash=computed_hash,
                                                     reason=reason))


@pytest.fixture
def make_node(ros_executor):  # the session fixture: rclpy is initialized
    made = []

    def make(**kwargs):
        node = Recorder(**kwargs)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        made.append((node, executor))
        return node, executor
    yield make
    for node, executor in made:
        executor.shutdown()
        node.destroy_node()


def spin(executor, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.02)


def test_configure_acquires_activate_switches_on_cleanup_releases(make_node):
    node, executor = make_node()
    assert node.trigger_configure() != SUCCESS  # not before VERIFIED
    node.hear(IdentityStatus.VERIFIED)
    assert node.trigger_configure() == SUCCESS
    assert node.calls == [("acquire", "h")] and node.identity_hash == "h"
    spin(executor, 3 * TICK_S)
    assert node.ticks == 0 and not node.chatter.is_activated and not node.serving

    assert node.trigger_activate() == SUCCESS
    assert node.calls[-1] == ("start", True, True)  # publishing before start() runs
    spin(executor, 5.5 * TICK_S)
    assert node.ticks >= 3

    assert node.trigger_deactivate() == SUCCESS
    assert node.calls[-1] == ("stop",)
    ticks = node.ticks
    spin(executor, 3 * TICK_S)
    assert node.ticks == ticks and not node.chatter.is_activated and not node.serving

    assert node.trigger_cleanup() == SUCCESS
    assert node.calls[-1] == ("release",) and node.identity_hash is None
    assert node.trigger_configure() == SUCCESS and node.trigger_activate() == SUCCESS
    spin(executor, 3.5 * TICK_S)
    assert node.ticks > ticks  # a new timer, created on configure


def test_a_revoked_identity_deactivates_and_shutdown_releases(make_node):
    node, _executor = make_node()
    node.hear(IdentityStatus.VERIFIED)
    assert node.trigger_configure() == SUCCESS and node.trigger_activate() == SUCCESS
    node.hear(IdentityStatus.STORE_CORRUPTED, reason="a hash does not match")
    assert not node.serving and node.calls[-1] == ("stop",)
    assert node.trigger_activate() != SUCCESS  # no verified identity any more
    assert node.trigger_shutdown() == SUCCESS
    assert node.calls[-2:] == [("stop",), ("release",)]


def test_a_failed_acquire_leaves_nothing_held(make_node):
    node, _executor = make_node(fail_in="acquire")
    node.hear(IdentityStatus.VERIFIED)
    assert node.trigger_configure() != SUCCESS
    assert node.calls == [("acquire", "h"), ("release",)] and node.identity_hash is None


def test_a_failed_start_switches_everything_off_again(make_node):
    node, _executor = make_node(fail_in="start")
    node.hear(IdentityStatus.VERIFIED)
    assert node.trigger_configure() == SUCCESS
    assert node.trigger_activate() != SUCCESS
    assert node.calls[-1] == ("stop",)
    assert not node.chatter.is_activated and not node.serving

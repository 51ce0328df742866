"""An operator controls the memory nodes' lifecycle; the verifier respects it (nav2's
lifecycle-manager convention) and hands control back on `manage_nodes`."""

import time

import pytest

from lifecycle_msgs.msg import State, Transition
from lifecycle_msgs.srv import ChangeState

from robot_memory.srv import ManageNodes

from ros.conftest import wait_until
from ros.test_governance import lifecycle_state, wait_active

MEMORY_NODES = ("episodic_logger", "consolidator", "grounding_server")
INACTIVE, ACTIVE = State.PRIMARY_STATE_INACTIVE, State.PRIMARY_STATE_ACTIVE


def manage(probe, command, *names) -> ManageNodes.Response:
    return probe.call_signed(ManageNodes, "manifest_verifier/manage_nodes",
                             ManageNodes.Request(command=command, node_names=list(names)))


def stays(probe, node, state, seconds=2.5):
    """The node is in `state` on every look for several of the verifier's poll periods."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert lifecycle_state(probe, node) == state, f"{node} left state {state}"
        time.sleep(0.2)


def verifier_diagnostics(probe):
    return probe.diagnostics.get("manifest_verifier", {})


def test_an_operators_deactivate_is_respected_until_resume(probe, start_stack):
    start_stack()
    wait_active(probe, "consolidator")
    answer = probe.call(ChangeState, "consolidator/change_state", ChangeState.Request(
        transition=Transition(id=Transition.TRANSITION_DEACTIVATE)))
    assert answer.success
    stays(probe, "consolidator", INACTIVE)
    wait_until(lambda: "deactivate" in verifier_diagnostics(probe).get("held.consolidator", ""),
               10, lambda: f"the hold on /diagnostics: {verifier_diagnostics(probe)}")
    assert lifecycle_state(probe, "episodic_logger") == ACTIVE  # the others are untouched

    resumed = manage(probe, ManageNodes.Request.RESUME, "consolidator")
    assert resumed.success, resumed.message
    wait_active(probe, "consolidator")
    wait_until(lambda: verifier_diagnostics(probe).get("held.consolidator") == "no", 10,
               "the hold to leave /diagnostics")


def test_pause_holds_every_node_inactive_and_startup_brings_them_back(probe, start_stack):
    start_stack()
    for node in MEMORY_NODES:
        wait_active(probe, node)
    paused = manage(probe, ManageNodes.Request.PAUSE)
    assert paused.success, paused.message
    for node in MEMORY_NODES:
        wait_until(lambda n=node: lifecycle_state(probe, n) == INACTIVE, 30, f"{node} paused")
    stays(probe, "grounding_server", INACTIVE)
    assert probe.grounding.query("manipulation.grasp").status == "IDENTITY_UNVERIFIED"

    started = manage(probe, ManageNodes.Request.STARTUP)
    assert started.success, started.message
    for node in MEMORY_NODES:
        wait_active(probe, node)


def test_manage_nodes_names_an_unknown_node(probe, start_stack):
    start_stack()
    answer = manage(probe, ManageNodes.Request.PAUSE, "consolidator", "planner")
    assert not answer.success and "['planner'] not managed" in answer.message


def test_resume_cannot_override_a_failed_identity(probe, start_stack):
    start_stack(certified_hash="0" * 64)
    answer = manage(probe, ManageNodes.Request.RESUME)
    assert not answer.success and "identity MISMATCH" in answer.message
    assert lifecycle_state(probe, "consolidator") == State.PRIMARY_STATE_UNCONFIGURED


def shut_down_and_see_the_process_exit(probe, stack, node: str) -> None:
    """`ros2 lifecycle set /<node> shutdown` on an active node; its process exits with 0."""
    wait_active(probe, node)
    answer = probe.call(ChangeState, f"{node}/change_state", ChangeState.Request(
        transition=Transition(id=Transition.TRANSITION_ACTIVE_SHUTDOWN)))
    assert answer.success
    assert stack.process_of(node).wait(15) == 0


def test_a_finalized_node_exits_and_manage_nodes_says_so_until_it_is_respawned(
        probe, start_stack):
    """`ros2 lifecycle set /consolidator shutdown`: finalized is for good, so the process
    exits cleanly (a respawn can bring it back); until then RESUME and STARTUP fail."""
    stack = start_stack()
    shut_down_and_see_the_process_exit(probe, stack, "consolidator")
    for command in (ManageNodes.Request.RESUME, ManageNodes.Request.STARTUP):
        refused = manage(probe, command, "consolidator")
        assert not refused.success and "consolidator" in refused.message, refused.message
    with open(stack.log_path, "ab") as log:
        stack.respawn("consolidator", stdout=log, stderr=log)
    wait_active(probe, "consolidator")
    started = manage(probe, ManageNodes.Request.STARTUP)
    assert started.success, started.message


@pytest.mark.parametrize("one_process", [True], ids=["one_process"])
def test_in_one_process_a_finalized_node_ends_the_process_cleanly(probe, start_stack):
    stack = start_stack()
    shut_down_and_see_the_process_exit(probe, stack, "grounding_server")

"""A stack split across two stores never goes active: a node whose database_url differs
from the verifier's refuses to configure and names the parameter; the others serve."""

import time

import pytest
from lifecycle_msgs.msg import State

from ros.conftest import stack_log, wait_until
from ros.test_governance import lifecycle_state, wait_active

pytestmark = pytest.mark.ros


def test_a_node_on_another_store_refuses_to_configure_and_names_database_url(
        start_stack, probe, tmp_path):
    start_stack(nodes=["manifest_verifier", "episodic_logger", "grounding_server"])
    other = tmp_path / "other.db"
    stack = start_stack(nodes=["consolidator"], database_url=f"sqlite:///{other}")
    wait_active(probe, "episodic_logger")
    wait_active(probe, "grounding_server")
    wait_until(lambda: "split across two stores" in stack_log(stack), 30,
               "the consolidator's refusal in the log")
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:  # the verifier keeps asking; the answer stays no
        assert lifecycle_state(probe, "consolidator") == State.PRIMARY_STATE_UNCONFIGURED
        time.sleep(0.3)
    log = stack_log(stack)
    assert "database_url: this node opened sqlite:///" in log and str(other) in log

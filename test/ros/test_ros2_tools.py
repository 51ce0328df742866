"""The nodes as the real ros2 tools see them: `ros2 param get/dump` (the parameter
services), `ros2 lifecycle set ... shutdown`, and `ros2 node list` after a Ctrl-C."""

import os
import signal
import subprocess
import sys

import pytest
from rcl_interfaces.msg import ParameterType
from rcl_interfaces.srv import GetParameters, ListParameters

from conftest import wait_until

from robot_memory.store import MemoryStore

pytestmark = pytest.mark.ros


def test_every_parameter_can_be_read_and_dumped_with_its_default(start_stack, probe):
    """What `ros2 param get /episodic_logger result_topics` and `ros2 param dump` ask."""
    start_stack(nodes=["episodic_logger"])
    node = f"/{probe.namespace}/episodic_logger"
    got = probe.call(GetParameters, f"{node}/get_parameters",
                     GetParameters.Request(names=["result_topics"]))
    [value] = got.values
    assert (value.type, list(value.string_array_value)) == (
        ParameterType.PARAMETER_STRING_ARRAY, [])
    names = probe.call(ListParameters, f"{node}/list_parameters",
                       ListParameters.Request()).result.names
    assert "result_topics" in names and "database_url" in names
    dump = probe.call(GetParameters, f"{node}/get_parameters",
                      GetParameters.Request(names=names)).values
    assert len(dump) == len(names)
    assert all(v.type != ParameterType.PARAMETER_NOT_SET for v in dump)


def _node_names(probe) -> set[str]:
    return {name for name, ns in probe.get_node_names_and_namespaces()
            if ns == f"/{probe.namespace}"}


def test_a_clean_exit_leaves_the_graph_at_once(start_stack, probe):
    """After Ctrl-C, `ros2 node list` no longer shows the nodes: each process leaves the
    graph as it exits, not when its peers' lease (about 20 s) runs out. The bound is half
    the lease: well apart from it, with room for a loaded machine's discovery traffic."""
    nodes = ["manifest_verifier", "episodic_logger", "consolidator", "grounding_server"]
    stack = start_stack(nodes=nodes)
    wait_until(lambda: _node_names(probe) >= set(nodes), 30, "the four nodes on the graph")
    for process in stack.processes.values():
        process.send_signal(signal.SIGINT)
    assert all(p.wait(15) == 0 for p in stack.processes.values())
    wait_until(lambda: not _node_names(probe) & set(nodes), 10,
               lambda: f"the nodes to leave the graph; still there: {_node_names(probe)}")


def test_a_node_started_without_a_database_url_keeps_its_store_under_ros_home(
        tmp_path, namespace, manifest_file, certified_hash):
    """`ros2 run robot_memory manifest_verifier` with no database_url: the store goes to
    $ROS_HOME/robot_memory/, not into whatever directory the node was started from."""
    env = {**os.environ, "ROS_HOME": str(tmp_path / "ros_home")}
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "robot_memory.ros.entry", "manifest_verifier", "--ros-args",
         "-p", f"manifest_path:={manifest_file}", "-p", f"certified_hash:={certified_hash}",
         "-r", f"__ns:=/{namespace}"], cwd=workdir, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        store = tmp_path / "ros_home" / "robot_memory" / "robot_memory.db"
        wait_until(store.is_file, 30, f"the store at {store}")
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(15) == 0
    assert list(workdir.iterdir()) == []


def test_an_inactive_servers_answer_names_no_consultation_it_did_not_audit(
        start_stack, probe, db_url):
    """Every consultation_id names an audit record: inactive (no verifier here), the server
    audits nothing, so its answer carries none."""
    start_stack(nodes=["grounding_server"])
    assert probe.grounding.wait_for_service(30)
    answer = probe.grounding.query("manipulation.grasp", "glass_cup")
    assert answer.status == "IDENTITY_UNVERIFIED"
    assert answer.consultation_id == ""
    assert MemoryStore(db_url).identities() == []  # nothing was written

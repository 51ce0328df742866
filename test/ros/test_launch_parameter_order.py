"""The launch arguments win over a conflicting params_file, for every node, in both
process modes: real node processes started with exactly the parameter sources the
launch file passes (robot_memory/operation/launch_parameters.py), read back through their
parameter services as `ros2 param get` does (launch_ros itself is not on PyPI)."""

import os
import subprocess
import sys

import pytest
import yaml
from rcl_interfaces.srv import GetParameters
from rclpy.parameter import parameter_value_to_python

from conftest import BOTH_PROCESS_MODES

from robot_memory.operation.launch_parameters import parameter_sources
from robot_memory.msg import IdentityStatus
from robot_memory.operation.parameters import node_names

pytestmark = pytest.mark.ros


def conflicting_params_file(path, namespace: str, other_db: str) -> str:
    """Every way a parameters file can name the nodes, each with values the launch
    arguments must beat: their own section, a nested namespace, `/**`, and bare names."""
    wrong = {"database_url": other_db, "use_sim_time": True, "manifest_path": "/nowhere.yaml",
             "certified_hash": "0" * 64}
    document = {f"/**/{node}": {"ros__parameters": dict(wrong)} for node in node_names()}
    document["/**"] = {"ros__parameters": dict(wrong)}
    document[namespace] = {"consolidator": {"ros__parameters": dict(wrong)}}
    document["grounding_server"] = {"ros__parameters": dict(wrong)}
    path.write_text(yaml.safe_dump(document))
    return str(path)


def write(path, document) -> str:
    path.write_text(yaml.safe_dump(document))
    return str(path)


def start_as_launch_would(tmp_path, namespace, params_file, typed, one_process, log):
    """The node processes, each with the launch file's sources in its order."""
    processes = []
    for node in [None] if one_process else node_names():
        sources = parameter_sources(node, params_file, typed)
        name = node or "all_nodes"
        files = [write(tmp_path / f"{name}_defaults.yaml", sources.defaults),
                 sources.params_file,
                 write(tmp_path / f"{name}_arguments.yaml", sources.arguments)]
        command = [sys.executable, "-m", "robot_memory.ros.entry", name, "--ros-args",
                   "-r", f"__ns:=/{namespace}"]
        for path in files:
            command += ["--params-file", path]
        processes.append(subprocess.Popen(command, stdout=log, stderr=log,
                                          env=os.environ.copy()))
    return processes


@BOTH_PROCESS_MODES
def test_every_launch_argument_beats_a_conflicting_params_file(
        tmp_path, namespace, probe, manifest_file, certified_hash, db_url, one_process):
    params_file = conflicting_params_file(tmp_path / "params.yaml", namespace,
                                          f"sqlite:///{tmp_path}/other.db")
    typed = {"manifest_path": str(manifest_file), "certified_hash": certified_hash,
             "certified_hash_file": "", "database_url": db_url, "use_sim_time": "false"}
    with open(tmp_path / "nodes.log", "ab") as log:
        processes = start_as_launch_would(tmp_path, namespace, params_file, typed,
                                          one_process, log)
        try:
            for node in node_names():
                names = ["database_url", "use_sim_time"]
                if node == "manifest_verifier":
                    names += ["manifest_path", "certified_hash"]
                answer = probe.call(GetParameters, f"/{namespace}/{node}/get_parameters",
                                    GetParameters.Request(names=names))
                got = dict(zip(names, map(parameter_value_to_python, answer.values)))
                assert got == {name: (False if name == "use_sim_time" else typed[name])
                               for name in names}, node
            status = probe.wait_identity()
            assert status.state == IdentityStatus.VERIFIED, status.reason
        finally:
            for process in processes:
                process.send_signal(subprocess.signal.SIGINT)
            for process in processes:
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    assert not (tmp_path / "other.db").exists()  # no node ever opened the file's store

"""The launch file's `params_file`: its default sets nothing, and a file written as
docs/install.md shows sets the parameters of the node it names, parsed by rcl itself."""

import re
from pathlib import Path

import rclpy
from rclpy.context import Context
from rclpy.node import Node

from robot_memory.operation.parameters import SPEC_PATH, node_defaults, resolve_database_url
from robot_memory.ros.params import declare_parameters

ROOT = Path(__file__).resolve().parents[2]
NO_PARAMETERS = SPEC_PATH.parents[1] / "config" / "no_parameters.yaml"


def _declared(node_name: str, params_file: Path) -> dict:
    context = Context()
    rclpy.init(args=["--ros-args", "--params-file", str(params_file)], context=context)
    try:
        node = Node(node_name, namespace="/robot_7", context=context)
        try:
            return declare_parameters(node, node_name)
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def test_the_default_params_file_sets_nothing():
    assert "no_parameters.yaml" in (ROOT / "launch" / "robot_memory.launch.py").read_text()
    defaults = node_defaults("consolidator")
    defaults["database_url"] = resolve_database_url(defaults["database_url"])  # $ROS_HOME
    assert _declared("consolidator", NO_PARAMETERS) == defaults


def test_the_install_page_example_sets_the_named_nodes_parameters(tmp_path):
    install = (ROOT / "docs" / "install.md").read_text()
    example = re.search(r"```yaml\n(/\*\*/consolidator:.*?)```", install, re.DOTALL).group(1)
    params_file = tmp_path / "params.yaml"
    params_file.write_text(example)
    consolidator = _declared("consolidator", params_file)
    assert (consolidator["period_s"], consolidator["half_life_s"]) == (60.0, 604800.0)
    logger = _declared("episodic_logger", params_file)
    assert logger["result_topics"] == ["/arm/execution_results"]
    assert logger["flush_period_s"] == node_defaults("episodic_logger")["flush_period_s"]

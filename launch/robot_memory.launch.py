"""Launch robot_memory's four nodes on a real ROS 2 install.

    ros2 launch robot_memory robot_memory.launch.py \
        manifest_path:=/etc/robot/manifest.yaml certified_hash_file:=/etc/robot/certified_hash \
        database_url:=sqlite:////var/lib/robot_memory/memory.db use_sim_time:=true \
        operator_keys_file:=/etc/robot/operator_keys \
        params_file:=/etc/robot/robot_memory_params.yaml

`params_file` sets any other parameter (docs/parameters.md) with a ROS 2 parameters
file. The launch arguments (manifest_path, certified_hash, certified_hash_file,
database_url, operator_keys_file, use_sim_time) win over it, in every section it has:
each value of the file they replace is logged at start. What is passed in what order is
robot_memory/operation/launch_parameters.py (ROS-free, tested without launch_ros).

Node names and parameter defaults come from robot_memory/operation/parameters.yaml, the same
table `robot-memory bringup` reads, so both start the same nodes with the same parameters.
`one_process:=true` starts the four nodes in one process (robot_memory_all) instead.
"""

import os
import tempfile

import yaml
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnShutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from robot_memory.operation.launch_parameters import (ARGUMENTS, argument_values, load_params_file,
                                                      overruled, parameter_sources)
from robot_memory.operation.parameters import (SPEC_PATH, node_defaults, node_names,
                                               node_parameters, resolve_database_url)

# The default params_file: sets nothing (an empty path is not a parameters file).
NO_PARAMETERS = SPEC_PATH.parents[1] / "config" / "no_parameters.yaml"


def generate_launch_description():
    arguments = [
        # $ROS_HOME in the default store's URL is resolved here, so the nodes get the path.
        DeclareLaunchArgument(name,
                              default_value=resolve_database_url(str(node_defaults(node)[name])),
                              description=node_parameters(node)[name].description)
        for name, node in (("manifest_path", "manifest_verifier"),
                           ("certified_hash", "manifest_verifier"),
                           ("certified_hash_file", "manifest_verifier"),
                           ("database_url", "consolidator"),
                           ("operator_keys_file", "consolidator"))
    ]
    arguments += [
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="Use /clock (Gazebo or a bag) instead of the wall "
                                          "clock.", choices=["true", "false"]),
        DeclareLaunchArgument("namespace", default_value="",
                              description="Namespace for all four nodes and their topics."),
        DeclareLaunchArgument("log_level", default_value="info", description="Node log level."),
        DeclareLaunchArgument("params_file", default_value=str(NO_PARAMETERS),
                              description="ROS 2 parameters file for any other parameter "
                                          "(docs/parameters.md); the launch arguments win."),
        DeclareLaunchArgument("one_process", default_value="false",
                              description="Run the four nodes in one process "
                                          "(robot_memory_all)."),
    ]
    # The nodes are made when the arguments are known: the arguments file repeats them
    # under every section of the params_file, which is read then.
    return LaunchDescription(arguments + [OpaqueFunction(function=memory_nodes)])


def memory_nodes(context) -> list:
    def value(name: str) -> str:
        return LaunchConfiguration(name).perform(context)

    typed = {name: value(name) for name in ARGUMENTS}
    params_file = value("params_file")
    one_process = value("one_process").strip().lower() == "true"
    written: list[str] = []
    actions: list = [LogInfo(msg=f"robot_memory: {item.describe()}") for item in
                     overruled(load_params_file(params_file), argument_values(typed))]
    common = dict(namespace=value("namespace"), output="screen",
                  arguments=["--ros-args", "--log-level", value("log_level")])
    if one_process:
        sources = parameter_sources(None, params_file, typed)
        # No `name`: it would rename all four nodes of the process to one name.
        actions.append(Node(package="robot_memory", executable="robot_memory_all",
                            parameters=[write_file(sources.defaults, written),
                                        sources.params_file,
                                        write_file(sources.arguments, written)], **common))
    else:
        for name in node_names():
            sources = parameter_sources(name, params_file, typed)
            actions.append(Node(package="robot_memory", executable=name, name=name,
                                parameters=[write_file(sources.defaults, written),
                                            sources.params_file,
                                            write_file(sources.arguments, written)],
                                **common))
    # The files stay while a node may respawn, and go when the launch shuts down.
    actions.append(RegisterEventHandler(OnShutdown(
        on_shutdown=lambda *_: remove_files(written))))
    return actions


def write_file(document: dict, written: list[str]) -> str:
    with tempfile.NamedTemporaryFile("w", prefix="robot_memory_params_", suffix=".yaml",
                                     delete=False) as handle:
        yaml.safe_dump(document, handle)
    written.append(handle.name)
    return handle.name


def remove_files(paths: list[str]) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

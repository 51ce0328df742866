"""Launch robot_memory's four nodes on a real ROS 2 install.

    ros2 launch robot_memory robot_memory.launch.py \
        manifest_path:=/etc/robot/manifest.yaml certified_hash_file:=/etc/robot/certified_hash \
        database_url:=sqlite:////var/lib/robot_memory/memory.db use_sim_time:=true \
        operator_keys_file:=/etc/robot/operator_keys \
        params_file:=/etc/robot/robot_memory_params.yaml

`params_file` sets any other parameter (docs/parameters.md) with a ROS 2 parameters
file; the launch arguments win over it.

Node names and parameter defaults come from robot_memory/parameters.yaml, the same
table `robot-memory bringup` reads, so both start the same nodes with the same parameters.
`one_process:=true` starts the four nodes in one process (robot_memory_all) instead,
configured by one parameter file with a `/**/<node>` section per node.
"""

import os
import tempfile

import yaml
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnProcessStart, OnShutdown
from launch.conditions import IfCondition, UnlessCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterFile, ParameterValue

from robot_memory.parameters import (SPEC_PATH, node_defaults, node_names, node_parameters,
                                     resolve_database_url)

# The default params_file: sets nothing (an empty path is not a parameters file).
NO_PARAMETERS = SPEC_PATH.parent / "config" / "no_parameters.yaml"

# Launch arguments that set the node parameter of the same name (as strings, so a hash
# made only of digits is never read as a number).
STRING_ARGUMENTS = ("manifest_path", "certified_hash", "certified_hash_file", "database_url",
                    "operator_keys_file")


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
                                          "clock."),
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
    four_processes = UnlessCondition(LaunchConfiguration("one_process"))
    nodes = []
    for name in node_names():
        parameters = {key: value for key, value in node_defaults(name).items() if value != []}
        for key in STRING_ARGUMENTS:
            if key in parameters:
                parameters[key] = ParameterValue(LaunchConfiguration(key), value_type=str)
        parameters["use_sim_time"] = ParameterValue(LaunchConfiguration("use_sim_time"),
                                                    value_type=bool)
        # Order: table defaults, then params_file, then the launch arguments.
        from_arguments = {key: parameters.pop(key) for key in (*STRING_ARGUMENTS, "use_sim_time")
                          if key in parameters}
        nodes.append(Node(package="robot_memory", executable=name, name=name,
                          namespace=LaunchConfiguration("namespace"),
                          parameters=[parameters, LaunchConfiguration("params_file"),
                                      from_arguments],
                          arguments=["--ros-args", "--log-level",
                                     LaunchConfiguration("log_level")],
                          output="screen", condition=four_processes))
    # The one-process node is made only when asked for: its parameter file is written then.
    nodes.append(OpaqueFunction(function=one_process_node))
    return LaunchDescription(arguments + nodes)


def one_process_node(context) -> list:
    if not IfCondition(LaunchConfiguration("one_process")).evaluate(context):
        return []
    template = one_process_params_template()
    # No `name`: it would rename all four nodes of the process to one name.
    node = Node(package="robot_memory", executable="robot_memory_all",
                namespace=LaunchConfiguration("namespace"),
                # params_file goes last here: one file of /**/<node> sections carries
                # the table defaults and the launch arguments together.
                parameters=[ParameterFile(template, allow_substs=True),
                            LaunchConfiguration("params_file")],
                arguments=["--ros-args", "--log-level", LaunchConfiguration("log_level")],
                output="screen")
    # Launch reads the template once, as the process first starts, into a file of its own
    # (which it removes itself): ours goes then, or at shutdown if the process never
    # started, so no launch leaves a file behind.
    return [RegisterEventHandler(OnProcessStart(
                target_action=node, on_start=lambda *_: remove_template(template))),
            RegisterEventHandler(OnShutdown(on_shutdown=lambda *_: remove_template(template))),
            node]


def remove_template(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:  # already removed (a respawn starts the process again)
        pass


def one_process_params_template() -> str:
    """A parameter file with a `/**/<node>` section per node, the launch arguments left as
    $(var ...) substitutions (launch fills them in when the process starts)."""
    document = {}
    for name in node_names():
        values = {key: value for key, value in node_defaults(name).items() if value != []}
        for key in STRING_ARGUMENTS:
            if key in values:
                values[key] = f"@string:{key}@"
        values["use_sim_time"] = "@use_sim_time@"
        document[f"/**/{name}"] = {"ros__parameters": values}
    text = yaml.safe_dump(document)
    for key in STRING_ARGUMENTS:  # quoted: a hash made only of digits stays a string
        text = text.replace(f"'@string:{key}@'", f"'$(var {key})'") \
            .replace(f"@string:{key}@", f"'$(var {key})'")
    text = text.replace("'@use_sim_time@'", "$(var use_sim_time)") \
        .replace("@use_sim_time@", "$(var use_sim_time)")
    with tempfile.NamedTemporaryFile("w", prefix="robot_memory_params_", suffix=".yaml",
                                     delete=False) as handle:
        handle.write(text)
    return handle.name

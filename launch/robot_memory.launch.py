"""Launch robot_memory's four nodes on a real ROS 2 install.

    ros2 launch robot_memory robot_memory.launch.py \
        manifest_path:=/etc/robot/manifest.yaml certified_hash_file:=/etc/robot/certified_hash \
        database_url:=sqlite:////var/lib/robot_memory/memory.db use_sim_time:=true \
        params_file:=/etc/robot/robot_memory_params.yaml

`params_file` sets any other parameter (docs/parameters.md) with a ROS 2 parameters
file; the launch arguments win over it.

Node names and parameter defaults come from robot_memory/parameters.yaml, the same
table `robot-memory bringup` reads, so both start the same nodes with the same parameters.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from robot_memory.parameters import SPEC_PATH, node_defaults, node_names, node_parameters

# The default params_file: sets nothing (an empty path is not a parameters file).
NO_PARAMETERS = SPEC_PATH.parent / "config" / "no_parameters.yaml"

# Launch arguments that set the node parameter of the same name (as strings, so a hash
# made only of digits is never read as a number).
STRING_ARGUMENTS = ("manifest_path", "certified_hash", "certified_hash_file", "database_url")


def generate_launch_description():
    arguments = [
        DeclareLaunchArgument(name, default_value=str(node_defaults(node)[name]),
                              description=node_parameters(node)[name].description)
        for name, node in (("manifest_path", "manifest_verifier"),
                           ("certified_hash", "manifest_verifier"),
                           ("certified_hash_file", "manifest_verifier"),
                           ("database_url", "consolidator"))
    ]
    arguments += [
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="Use /clock (Gazebo or a bag) instead of the wall clock."),
        DeclareLaunchArgument("namespace", default_value="",
                              description="Namespace for all four nodes and their topics."),
        DeclareLaunchArgument("log_level", default_value="info", description="Node log level."),
        DeclareLaunchArgument("params_file", default_value=str(NO_PARAMETERS),
                              description="ROS 2 parameters file for any other parameter "
                                          "(docs/parameters.md); the launch arguments win."),
    ]
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
                          arguments=["--ros-args", "--log-level", LaunchConfiguration("log_level")],
                          output="screen"))
    return LaunchDescription(arguments + nodes)

"""Start robot_memory beside a Gazebo world: the four nodes with use_sim_time:=true and,
where ros_gz_bridge is installed, a bridge that carries Gazebo's /clock into ROS 2.

    ros2 launch robot_memory robot_memory_gazebo.launch.py \
        manifest_path:=/etc/robot/manifest.yaml certified_hash_file:=/etc/robot/certified_hash \
        database_url:=sqlite:////var/lib/robot_memory/memory.db

The nodes come from robot_memory.launch.py (included, not copied), so every argument it
declares (namespace, log_level, ...) works here too. Point the world's grasp skill at
the `execution_results` topic (robot_memory/msg/ExecutionResult, see the README).
"""

import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, LogInfo
from launch.conditions import IfCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration

STACK_LAUNCH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "robot_memory.launch.py")
# Gazebo (gz-sim) publishes its clock as gz.msgs.Clock; '[' bridges it one way, into ROS.
CLOCK_BRIDGE = "/clock@rosgraph_msgs/msg/Clock[gz.msgs.Clock"


def ros_gz_bridge_installed() -> bool:
    try:
        from ament_index_python.packages import (PackageNotFoundError,
                                                 get_package_share_directory)
    except ImportError:
        return False
    try:
        get_package_share_directory("ros_gz_bridge")
    except PackageNotFoundError:
        return False
    return True


def clock_bridge(installed: bool) -> list:
    if not installed:
        return [LogInfo(msg="ros_gz_bridge is not installed: robot_memory waits for /clock "
                            "from another source (bridge it yourself, or a bag's --clock)")]
    from launch_ros.actions import Node
    return [Node(package="ros_gz_bridge", executable="parameter_bridge", name="clock_bridge",
                 arguments=[CLOCK_BRIDGE], output="screen",
                 condition=IfCondition(LaunchConfiguration("bridge_clock")))]


def generate_launch_description():
    # Declared here too, so `--show-args` gives this file's default (true), not the
    # included file's (false).
    stack = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(STACK_LAUNCH),
        launch_arguments={"use_sim_time": LaunchConfiguration("use_sim_time")}.items())
    return LaunchDescription([
        DeclareLaunchArgument("use_sim_time", default_value="true",
                              choices=["true", "false"],
                              description="Use Gazebo's /clock (the point of this file)."),
        DeclareLaunchArgument("bridge_clock", default_value="true",
                              description="Bridge Gazebo's /clock with ros_gz_bridge "
                                          "(when it is installed)."),
        stack,
        *clock_bridge(ros_gz_bridge_installed()),
    ])

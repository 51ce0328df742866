"""Sim time waits for its clock: with use_sim_time, a node's ROS clock reads 0 until the
first /clock message arrives (Gazebo not started yet, a bag not playing). Nothing is
brought up, stored or served until then, so no result is stamped 0."""

from __future__ import annotations

from rclpy.node import Node

WAITING_FOR_CLOCK = "use_sim_time is true and no /clock has arrived yet"


def waiting_for_clock(node: Node) -> str:
    """Why `node` must wait for its clock (empty: it need not)."""
    clock = node.get_clock()
    if clock.ros_time_is_active and clock.now().nanoseconds == 0:
        return WAITING_FOR_CLOCK
    return ""

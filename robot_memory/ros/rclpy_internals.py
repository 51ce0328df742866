"""The two private rclpy attributes robot_memory uses, kept here so that a change in
rclpy breaks one place, loudly (test/ros/test_rclpy_internals.py runs on Jazzy and Kilted).

An empty list default (`result_topics`): rclpy takes [] for a byte array, so a string
array whose default is empty can only be declared by its type, and is then left without
a value. rclpy answers a whole get_parameters request that names it with nothing (`ros2
param get` says "Parameter not set", `ros2 param dump` prints `{}`), and offers no
public way to give a read-only parameter its value after declaring it. Its `_parameters`
entry is set here instead, to the typed default.

The logger's intake thread polls its readers' message-lost events instead of leaving
them to the executor: in the executor's wait set, they left a respawned logger under a
flood of results unable to answer record_event in time. rclpy (7.x on Jazzy, 9.x on
Kilted) offers no public poll: an event handler's `take_data` returns its status only
once the executor's wait has marked it ready, through `_ready_to_take_data`."""

from __future__ import annotations

from rclpy.exceptions import ParameterUninitializedException
from rclpy.parameter import Parameter

READY_FLAG = "_ready_to_take_data"
PARAMETERS = "_parameters"


def declare_string_array(node, name: str, default: list[str], descriptor) -> list[str]:
    """Declare a STRING_ARRAY parameter (an override from a parameters file wins), with
    `default` as its value otherwise, even when it is empty; return its value."""
    node.declare_parameter(name, Parameter.Type.STRING_ARRAY, descriptor)
    try:
        return list(node.get_parameter(name).value)
    except ParameterUninitializedException:
        pass
    parameters = getattr(node, PARAMETERS, None)
    if not isinstance(parameters, dict) or name not in parameters:
        raise AttributeError(f"rclpy's Node keeps no {PARAMETERS} with {name}: "
                             "robot_memory/ros/rclpy_internals.py needs updating")
    parameters[name] = Parameter(name, Parameter.Type.STRING_ARRAY, list(default))
    return list(default)


def poll_event(handler):
    """The handler's new status (e.g. QoSMessageLostInfo) if its count changed since the
    last poll, else None. AttributeError if rclpy no longer has the flag."""
    if not hasattr(handler, READY_FLAG):
        raise AttributeError(f"rclpy's {type(handler).__name__} has no {READY_FLAG}: "
                             "robot_memory/ros/rclpy_internals.py needs updating")
    setattr(handler, READY_FLAG, True)
    info = handler.take_data()
    if info is None or getattr(info, "total_count_change", 1) <= 0:
        return None
    return info

"""The three private rclpy attributes robot_memory uses, kept here so that a change in
rclpy breaks one place, loudly (test/ros/test_rclpy_internals.py runs on Jazzy and Kilted).

A lifecycle node's state machine (`_state_machine`) holds the node's rcl handle, and
rclpy's `destroy_node` leaves it: the node, and with it the process's DDS participant,
then outlive the destroyed node until the process exits without saying goodbye, so its
peers list it (`ros2 node list`) until its lease runs out, about 20 s. The state machine
is destroyed here after the node.

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
from rclpy.lifecycle import LifecycleNode
from rclpy.parameter import Parameter

READY_FLAG = "_ready_to_take_data"
PARAMETERS = "_parameters"
STATE_MACHINE = "_state_machine"


def destroy_lifecycle_node(node) -> None:
    """destroy_node(), then the lifecycle state machine that keeps the node alive."""
    state_machine = getattr(node, STATE_MACHINE, None)
    if state_machine is None and isinstance(node, LifecycleNode):
        raise AttributeError(f"rclpy's LifecycleNode has no {STATE_MACHINE}: "
                             "robot_memory/ros/rclpy_internals.py needs updating")
    node.destroy_node()
    if state_machine is not None:
        state_machine.destroy_when_not_in_use()


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

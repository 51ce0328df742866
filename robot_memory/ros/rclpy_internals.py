"""Every private rclpy name robot_memory uses, each behind one function of this module,
so that a change in rclpy breaks one place, loudly: each function raises AttributeError
naming this file when its name is gone, and test/ros/test_rclpy_internals.py runs each
one on every distribution CI runs (Kilted and Jazzy). `PRIVATE_NAMES` lists them; the
README's count of private rclpy attributes is its length (test/core/test_readme.py).

No other module of robot_memory reads a private attribute of rclpy or of any other
library (test/core/test_private_names.py looks for one outside this module).
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import partial
from typing import Callable, Iterator, NamedTuple

from rclpy.exceptions import ParameterUninitializedException
from rclpy.lifecycle import LifecycleNode
from rclpy.parameter import Parameter

READY_FLAG = "_ready_to_take_data"
PARAMETERS = "_parameters"
STATE_MACHINE = "_state_machine"
TAKE_MESSAGE = "take_message"


class PrivateName(NamedTuple):
    """One private name: whose it is, the name, and the function here that uses it."""

    owner: str
    name: str
    used_by: str


PRIVATE_NAMES = (
    PrivateName("rclpy.event_handler.EventHandler", READY_FLAG, "poll_event"),
    PrivateName("rclpy.node.Node", PARAMETERS, "declare_string_array"),
    PrivateName("rclpy.lifecycle.LifecycleNode", STATE_MACHINE, "destroy_lifecycle_node"),
    PrivateName("rclpy._rclpy_pybind11.Subscription (Subscription.handle)", TAKE_MESSAGE,
                "taking"),
)


def _missing(owner: str, name: str) -> AttributeError:
    return AttributeError(f"rclpy's {owner} has no {name}: "
                          "robot_memory/ros/rclpy_internals.py needs updating")


def destroy_lifecycle_node(node) -> None:
    """destroy_node(), then the lifecycle state machine that keeps the node alive.

    Why private: a lifecycle node's state machine (`_state_machine`) holds the node's
    rcl handle, and rclpy's `destroy_node` leaves it. The node, and with it the
    process's DDS participant, then outlive the destroyed node until the process exits
    without saying goodbye, so its peers list it (`ros2 node list`) until its lease runs
    out. rclpy offers no public way to destroy the state machine.
    """
    state_machine = getattr(node, STATE_MACHINE, None)
    if state_machine is None and isinstance(node, LifecycleNode):
        raise _missing("LifecycleNode", STATE_MACHINE)
    node.destroy_node()
    if state_machine is not None:
        state_machine.destroy_when_not_in_use()


def declare_string_array(node, name: str, default: list[str], descriptor) -> list[str]:
    """Declare a STRING_ARRAY parameter (an override from a parameters file wins), with
    `default` as its value otherwise, even when it is empty; return its value.

    Why private: rclpy takes [] for a byte array, so a string array whose default is
    empty (`result_topics`) can only be declared by its type, and is then left without
    a value. rclpy answers a whole get_parameters request that names it with nothing
    (`ros2 param get` says "Parameter not set", `ros2 param dump` prints `{}`), and
    offers no public way to give a read-only parameter its value after declaring it.
    Its `_parameters` entry is set here instead, to the typed default.
    """
    node.declare_parameter(name, Parameter.Type.STRING_ARRAY, descriptor)
    try:
        return list(node.get_parameter(name).value)
    except ParameterUninitializedException:
        pass
    parameters = getattr(node, PARAMETERS, None)
    if not isinstance(parameters, dict) or name not in parameters:
        raise _missing("Node", f"{PARAMETERS} with {name}")
    parameters[name] = Parameter(name, Parameter.Type.STRING_ARRAY, list(default))
    return list(default)


def poll_event(handler):
    """The handler's new status (e.g. QoSMessageLostInfo) if its count changed since the
    last poll, else None. AttributeError if rclpy no longer has the flag.

    Why private: the logger's intake thread polls its readers' message-lost events
    instead of leaving them to the executor: in the executor's wait set, they left a
    respawned logger under a flood of results unable to answer record_event in time.
    rclpy (7.x on Jazzy, 9.x on Kilted) offers no public poll: an event handler's
    `take_data` returns its status only once the executor's wait has marked it ready,
    through `_ready_to_take_data`.
    """
    if not hasattr(handler, READY_FLAG):
        raise _missing(type(handler).__name__, READY_FLAG)
    setattr(handler, READY_FLAG, True)
    info = handler.take_data()
    if info is None or getattr(info, "total_count_change", 1) <= 0:
        return None
    return info


@contextmanager
def taking(subscription) -> Iterator[Callable[[], tuple | None]]:
    """Within the block, `take()` gives the subscription's next message and its info
    (`(data, info)`: serialized bytes for a raw subscription), or None when none has
    arrived. The subscription's handle is held for the block, as rclpy's executor holds
    it while it takes.

    Why private: rclpy has no public take. Its executors and `wait_for_message` take
    through `Subscription.handle.take_message(msg_type, raw)`, a method of the handle,
    an object of rclpy's private extension module (`rclpy._rclpy_pybind11`), and so do
    the logger's intake thread and its drain at stop: they take outside the executor
    (ros/logger_intake.py says why). `take` is bound once per block: nothing is looked
    up per message.
    """
    handle = subscription.handle
    with handle:
        take_message = getattr(handle, TAKE_MESSAGE, None)
        if take_message is None:
            raise _missing(type(handle).__name__, TAKE_MESSAGE)
        yield partial(take_message, subscription.msg_type, subscription.raw)

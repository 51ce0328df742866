"""Spin a node's latency-critical callback alone, and all its other callbacks in a thread
of their own, on the same node.

rclpy lets a node belong to one executor, and that executor rebuilds its wait set from
every entity it may run on each turn: a lifecycle node's state services, its parameter
services, its publishers' event handlers. A node whose one latency-critical callback
(grounding_server's `ground`) must neither queue behind the others nor pay for them on
every request puts it in a RequestCallbackGroup: its MainExecutor waits on that group
alone, and a SideExecutor, spun in another thread, waits on everything else. Both use
only the public executor hooks (`get_nodes`, `can_execute`); the node keeps all its
entities, so `ros2 node info` lists them all.
"""

from __future__ import annotations

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.guard_condition import GuardCondition
from rclpy.node import Node


class RequestCallbackGroup(MutuallyExclusiveCallbackGroup):
    """The entities only a MainExecutor runs, one at a time."""


def _in_request_group(entity) -> bool:
    return isinstance(entity.callback_group, RequestCallbackGroup)


def _mains(entity) -> bool:
    """What the MainExecutor waits on: the RequestCallbackGroup, and the node's guard
    conditions (the process's stop request wakes it with one, ros/spin.py). Every other
    entity is the SideExecutor's: a guard condition two wait sets wait on wakes only the
    one that takes its trigger first."""
    return isinstance(entity, GuardCondition) or _in_request_group(entity)


class MainExecutor(SingleThreadedExecutor):
    """A single-threaded executor that waits on RequestCallbackGroup entities alone, and
    on the node's guard conditions."""

    def can_execute(self, entity) -> bool:
        return _mains(entity) and super().can_execute(entity)


class SideExecutor(SingleThreadedExecutor):
    """Runs every entity of a node that another executor (a MainExecutor) owns, except
    its RequestCallbackGroup and guard conditions: the lifecycle and parameter services,
    subscriptions, timers. It stops by its own shutdown(). Never added to the node (that
    would take it from its main executor): it names the node itself."""

    def __init__(self, node: Node):
        super().__init__(context=node.context)
        self._node = node

    def get_nodes(self) -> list[Node]:
        return [self._node]

    def can_execute(self, entity) -> bool:
        return not _mains(entity) and super().can_execute(entity)

"""Spin some of a node's callbacks in a thread of their own, on the same node.

rclpy lets a node belong to one executor. A node whose one latency-critical callback
must never queue behind the others (grounding_server's `ground`) puts the others in a
SideCallbackGroup: its main executor (MainExecutor) skips them, and a SideExecutor,
spun in another thread, waits on them alone. Both use only the public executor hooks
(`get_nodes`, `can_execute`); the node keeps all its entities, so `ros2 node info`
lists them all.
"""

from __future__ import annotations

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node


class SideCallbackGroup(MutuallyExclusiveCallbackGroup):
    """Entities only a SideExecutor runs, one at a time."""


class MainExecutor(SingleThreadedExecutor):
    """A single-threaded executor that leaves SideCallbackGroup entities alone."""

    def can_execute(self, entity) -> bool:
        return not isinstance(entity.callback_group, SideCallbackGroup) \
            and super().can_execute(entity)


class SideExecutor(SingleThreadedExecutor):
    """Runs one SideCallbackGroup of a node that another executor owns. Never added to
    the node (that would take it from its main executor): it names the node itself."""

    def __init__(self, node: Node, group: SideCallbackGroup):
        super().__init__(context=node.context)
        self._node = node
        self._group = group

    def get_nodes(self) -> list[Node]:
        return [self._node]

    def can_execute(self, entity) -> bool:
        return entity.callback_group is self._group and super().can_execute(entity)

"""One /diagnostics status per node, from a dict of counters."""

from __future__ import annotations

from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node

from robot_memory.ros.qos import DIAGNOSTICS_QOS

OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR


class DiagnosticsPublisher:
    def __init__(self, node: Node, name: str = "", hardware_id: str = ""):
        """`name`/`hardware_id` default to the node's: a companion node can report for
        the node it serves."""
        self._node = node
        self._name = f"robot_memory: {name or node.get_name()}"
        self._hardware_id = hardware_id or node.get_fully_qualified_name()
        self._publisher = node.create_publisher(DiagnosticArray, "/diagnostics", DIAGNOSTICS_QOS)

    def publish(self, level: int, message: str, values: dict[str, Any]) -> None:
        status = DiagnosticStatus(level=level, name=self._name, message=message,
                                  hardware_id=self._hardware_id)
        status.values = [KeyValue(key=str(k), value=str(v)) for k, v in sorted(values.items())]
        array = DiagnosticArray(status=[status])
        array.header.stamp = self._node.get_clock().now().to_msg()
        self._publisher.publish(array)

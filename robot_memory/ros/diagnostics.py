"""One /diagnostics status per node, from a dict of counters."""

from __future__ import annotations

from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node

from robot_memory.ros.qos import DIAGNOSTICS_QOS

OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR


class DiagnosticsPublisher:
    def __init__(self, node: Node):
        self._node = node
        self._publisher = node.create_publisher(DiagnosticArray, "/diagnostics", DIAGNOSTICS_QOS)

    def publish(self, level: int, message: str, values: dict[str, Any]) -> None:
        status = DiagnosticStatus(level=level, name=f"robot_memory: {self._node.get_name()}",
                                  message=message, hardware_id=self._node.get_fully_qualified_name())
        status.values = [KeyValue(key=str(k), value=str(v)) for k, v in sorted(values.items())]
        array = DiagnosticArray(status=[status])
        array.header.stamp = self._node.get_clock().now().to_msg()
        self._publisher.publish(array)

"""One /diagnostics status per node, from a dict of counters; with a key for each
hand-written codec the node passed over for rclpy's (wire/fast_paths.py)."""

from __future__ import annotations

from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node

from robot_memory.ros.qos import DIAGNOSTICS_QOS
from robot_memory.wire.fast_paths import FastPaths

OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR


class DiagnosticsPublisher:
    def __init__(self, node: Node, name: str = "", hardware_id: str = ""):
        """`name`/`hardware_id` default to the node's: a companion node can report for
        the node it serves."""
        self._node = node
        self._name = f"robot_memory: {name or node.get_name()}"
        self._hardware_id = hardware_id or node.get_fully_qualified_name()
        self._publisher = node.create_publisher(DiagnosticArray, "/diagnostics", DIAGNOSTICS_QOS)
        self._fast_paths = FastPaths(node.get_logger().warning)

    def fast_path_off(self, message_type: str, reason: str) -> None:
        """`message_type`'s hand-written codec was passed over for rclpy's: said once in
        the node's log, and from then on a key of every status."""
        self._fast_paths.off(message_type, reason)

    def publish(self, level: int, message: str, values: dict[str, Any]) -> None:
        status = DiagnosticStatus(level=level, name=self._name, message=message,
                                  hardware_id=self._hardware_id)
        values = {**values, **self._fast_paths.diagnostic_values()}
        status.values = [KeyValue(key=str(k), value=str(v)) for k, v in sorted(values.items())]
        array = DiagnosticArray(status=[status])
        array.header.stamp = self._node.get_clock().now().to_msg()
        self._publisher.publish(array)

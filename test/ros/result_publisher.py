"""A skill in its own process: publishes N ExecutionResults on a topic once a subscriber
has matched (every 5th with a zero header stamp), then exits. Usage: TOPIC N."""

import sys

import rclpy
from rclpy.node import Node
from robot_memory.msg import ExecutionResult, KeyValue

from robot_memory.ros.matching import wait_for_subscriber
from robot_memory.ros.qos import EXECUTION_RESULTS_QOS


def main() -> int:
    topic, count = sys.argv[1], int(sys.argv[2])
    rclpy.init()
    node = Node("result_publisher")
    publisher = node.create_publisher(ExecutionResult, topic, EXECUTION_RESULTS_QOS)
    if not wait_for_subscriber(publisher, 30.0):
        print("no subscriber", file=sys.stderr)
        return 1
    for i in range(count):
        msg = ExecutionResult(skill_id="navigation.dock", target_class="dock_3",
                              environment="ward_2", zone="corridor", success=i % 3 != 0,
                              failure_reason="" if i % 3 else "blocked", duration_s=2.0)
        msg.parameters = [KeyValue(key="speed_mps", value=0.1 * (i % 4 + 1))]
        if i % 5:
            msg.header.stamp.sec, msg.header.stamp.nanosec = 5000 + i, 250
        publisher.publish(msg)
    rclpy.spin_once(node, timeout_sec=1.0)  # let reliable delivery finish before leaving
    node.destroy_node()
    rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Background load: publish execution results at a steady rate (own process), so the
logger ingests and the consolidator runs passes while latency is measured."""

import argparse
import time

import rclpy
from rclpy.executors import ExternalShutdownException

from robot_memory.msg import ExecutionResult, KeyValue
from robot_memory.ros.qos import EXECUTION_RESULTS_QOS


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--targets", type=int, default=2500)
    args = parser.parse_args()
    rclpy.init()
    node = rclpy.create_node("bench_load_publisher")
    publisher = node.create_publisher(ExecutionResult, "execution_results",
                                      EXECUTION_RESULTS_QOS)
    period, sent, started = 1.0 / args.rate, 0, time.monotonic()
    try:
        while rclpy.ok():
            msg = ExecutionResult(skill_id="manipulation.grasp",
                                  target_class=f"object_{sent % args.targets}",
                                  environment="env_0", success=sent % 3 != 0,
                                  failure_reason="" if sent % 3 else "slipped")
            msg.header.stamp = node.get_clock().now().to_msg()
            msg.parameters = [KeyValue(key="force_n", value=25.0)]
            publisher.publish(msg)
            sent += 1
            time.sleep(max(0.0, started + sent * period - time.monotonic()))
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()

"""Background load for the grounding benchmark, in its own process: publish execution
results at a steady rate on `execution_results`, so the logger ingests and the
consolidator runs passes while round trips are timed. The results continue the
benchmark store's own stream (bench.stores.payload and stamp_ns from --start on), so
they land on existing fact keys with the same outcome mix and consistent event time.

    python -m bench.load_publisher [--rate 200] [--facts 10000] [--start 1000000]
"""

import argparse
import time

import rclpy
from rclpy.executors import ExternalShutdownException

from bench.stores import KeySpace, payload, stamp_ns
from robot_memory.msg import ExecutionResult, KeyValue
from robot_memory.ros.conversions import ns_to_stamp
from robot_memory.ros.qos import EXECUTION_RESULTS_QOS


def result_message(i: int, keys: KeySpace) -> ExecutionResult:
    fields = payload(i, keys)
    msg = ExecutionResult(skill_id=fields["skill_id"], target_class=fields["target_class"],
                          environment=fields["environment"], success=fields["success"],
                          failure_reason=fields["failure_reason"],
                          duration_s=fields["duration_s"])
    msg.parameters = [KeyValue(key=k, value=v) for k, v in fields["parameters"].items()]
    msg.observations = [KeyValue(key=k, value=v) for k, v in fields["observations"].items()]
    msg.header.stamp = ns_to_stamp(stamp_ns(i))
    return msg


def publish_steadily(publisher, rate: float, keys: KeySpace, start: int) -> None:
    """Publish on a fixed schedule (not sleep-after-send), so the rate does not drift."""
    period, sent, started = 1.0 / rate, 0, time.monotonic()
    while rclpy.ok():
        publisher.publish(result_message(start + sent, keys))
        sent += 1
        time.sleep(max(0.0, started + sent * period - time.monotonic()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=200.0, help="results per second")
    parser.add_argument("--facts", type=int, default=10_000, help="key space of the store")
    parser.add_argument("--start", type=int, default=0,
                        help="index of the first result (the store's event count)")
    args = parser.parse_args()
    rclpy.init()
    node = rclpy.create_node("bench_load_publisher")
    publisher = node.create_publisher(ExecutionResult, "execution_results",
                                      EXECUTION_RESULTS_QOS)
    try:
        publish_steadily(publisher, args.rate, KeySpace.for_facts(args.facts), args.start)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()

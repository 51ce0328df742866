"""A reader that falls behind, in its own process, as the logger's does in a burst: a
keep-all reader of execution results, with the node processes' Fast DDS profile, that
takes nothing until it reads a line on stdin, then takes everything. Prints "ready" once
it has matched the publisher (start that first: a reader that has not yet matched a
writer ignores its samples), and at the end a JSON line {"received": N, "lost": N}.
Usage: TOPIC COUNT."""

import json
import sys
import time

from robot_memory.operation.middleware import use_fastdds_profiles


def main() -> int:
    topic, count = sys.argv[1], int(sys.argv[2])
    use_fastdds_profiles()  # before rclpy starts the middleware, as entry.run does
    import rclpy
    from rclpy.event_handler import SubscriptionEventCallbacks
    from rclpy.node import Node

    from robot_memory.msg import ExecutionResult
    from robot_memory.ros.qos import execution_results_reader_qos

    rclpy.init()
    node = Node("held_reader")
    seen = {"received": 0, "lost": 0, "matched": 0}

    def on_lost(info) -> None:
        seen["lost"] = int(info.total_count)

    def on_matched(info) -> None:
        seen["matched"] = int(info.current_count)

    def on_result(_data) -> None:
        seen["received"] += 1

    node.create_subscription(
        ExecutionResult, topic, on_result, execution_results_reader_qos(1000, True),
        event_callbacks=SubscriptionEventCallbacks(message_lost=on_lost, matched=on_matched),
        raw=True)
    while not seen["matched"]:  # nothing is published before this
        rclpy.spin_once(node, timeout_sec=0.1)
    print("ready", flush=True)
    sys.stdin.readline()  # held: nothing is taken while the publisher sends
    last_change, last = time.monotonic(), -1
    while seen["received"] + seen["lost"] < count and time.monotonic() - last_change < 5.0:
        rclpy.spin_once(node, timeout_sec=0.1)
        if seen["received"] != last:
            last_change, last = time.monotonic(), seen["received"]
    print(json.dumps({"received": seen["received"], "lost": seen["lost"]}), flush=True)
    node.destroy_node()
    rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A skill in its own process that outlives a logger restart: N results on TOPIC with
EXECUTION_RESULTS_QOS (or a volatile copy of it, with `volatile`), intent_id
"restart-<i>", in two halves. Prints "ready" once a subscriber has matched, "half" after
the first half; publishes the second half when it reads a line on stdin, then prints
"sent". At the next line it publishes "late-<k>" every 0.1 s, for a reader that cannot
be waited for (a volatile one has no history). It stays alive (its history held for a
late reader) until stdin closes.
Usage: TOPIC N [volatile]."""

import sys
import threading

import rclpy
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile

from robot_memory.msg import ExecutionResult, KeyValue
from robot_memory.ros.matching import wait_for_subscriber
from robot_memory.ros.qos import EXECUTION_RESULTS_QOS


def result(i: int, name: str = "restart") -> ExecutionResult:
    msg = ExecutionResult(skill_id="manipulation.grasp", target_class="glass_cup",
                          environment="sim_relaxed", success=i % 4 != 0,
                          failure_reason="" if i % 4 else "slipped", intent_id=f"{name}-{i}")
    msg.parameters = [KeyValue(key="force_n", value=20.0 + i % 10)]
    msg.header.stamp.sec = 7000 + i
    return msg


def main() -> int:
    topic, count = sys.argv[1], int(sys.argv[2])
    qos = EXECUTION_RESULTS_QOS
    if sys.argv[3:] == ["volatile"]:
        qos = QoSProfile(depth=qos.depth, history=qos.history, reliability=qos.reliability,
                         durability=DurabilityPolicy.VOLATILE)
    rclpy.init()
    node = Node("restart_publisher")
    publisher = node.create_publisher(ExecutionResult, topic, qos)
    if not wait_for_subscriber(publisher, 30.0):
        print("no subscriber", flush=True)
        return 1
    print("ready", flush=True)
    half = count // 2
    for i in range(half):
        publisher.publish(result(i))
    print("half", flush=True)
    sys.stdin.readline()
    for i in range(half, count):
        publisher.publish(result(i))
    print("sent", flush=True)
    closed = threading.Event()
    if sys.stdin.readline():
        threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
        late = 0
        while not closed.wait(0.1):
            publisher.publish(result(late, "late"))
            late += 1
    sys.stdin.read()  # until closed: a late reader still gets the history
    node.destroy_node()
    rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

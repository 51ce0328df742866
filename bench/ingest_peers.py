"""The ROS processes of the ingest benchmark (bench.ingest starts them; it does not
touch ROS itself).

    python -m bench.ingest_peers publish --rate R --seconds S --subscribers N --tag T
        waits until N subscriptions match, publishes R results/s for S s on a fixed
        schedule (intent_id T), prints {"sent": n} as JSON. With --invalid, every
        result carries force_n = NaN (the logger refuses each: non_finite_value).
    python -m bench.ingest_peers noop --out FILE
        the baseline: a do-nothing subscriber with the logger's reader QoS, on a
        SingleThreadedExecutor; also keeps the logger's last /diagnostics status. Writes
        {"received": {tag: n}, "logger_diagnostics": {...}} to FILE every 0.2 s.
    python -m bench.ingest_peers ground --rate R
        calls `ground` R times per second until stopped (the planner meanwhile).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections import Counter

import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

from bench.load_publisher import result_message
from bench.stores import KeySpace
from robot_memory.msg import ExecutionResult, KeyValue
from robot_memory.operation.parameters import node_defaults
from robot_memory.ros.qos import (DIAGNOSTICS_QOS, EXECUTION_RESULTS_QOS,
                                  execution_results_reader_qos)

# The baseline reads with the logger's own reader QoS (its defaults).
LOGGER = node_defaults("episodic_logger")
READER_QOS = execution_results_reader_qos(LOGGER["history_depth"], LOGGER["keep_all_history"])
from robot_memory.srv import GroundingQuery


def publish(args) -> None:
    node = rclpy.create_node("bench_ingest_publisher")
    publisher = node.create_publisher(ExecutionResult, "execution_results",
                                      EXECUTION_RESULTS_QOS)
    deadline = time.monotonic() + 120
    while publisher.get_subscription_count() < args.subscribers:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {publisher.get_subscription_count()} of "
                               f"{args.subscribers} subscribers matched")
        time.sleep(0.05)
    time.sleep(1.0)  # both sides of the match settled (see robot_memory.ros.matching)
    keys, total = KeySpace.for_facts(1000), int(args.rate * args.seconds)
    messages = [result_message(args.start + i, keys) for i in range(total)]
    for msg in messages:
        msg.intent_id = args.tag
        if args.invalid:
            msg.parameters = [KeyValue(key="force_n", value=math.nan)]
    print("publishing", flush=True)
    period, started = 1.0 / args.rate, time.monotonic()
    for sent, msg in enumerate(messages, start=1):
        publisher.publish(msg)
        time.sleep(max(0.0, started + sent * period - time.monotonic()))
    print(json.dumps({"sent": total, "seconds": round(time.monotonic() - started, 3)}),
          flush=True)
    time.sleep(2.0)  # reliable: let the last samples be acknowledged before we go
    node.destroy_node()


def noop(args) -> None:
    node = rclpy.create_node("bench_ingest_noop")
    received: Counter[str] = Counter()
    diagnostics: dict[str, str] = {}

    def on_result(msg: ExecutionResult) -> None:
        received[msg.intent_id] += 1

    def on_diagnostics(msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.hardware_id == "/episodic_logger":  # this run's logger only
                diagnostics.clear()
                diagnostics.update({kv.key: kv.value for kv in status.values},
                                   level=str(status.level[0]), message=status.message)

    def dump() -> None:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as handle:
            json.dump({"received": dict(received), "logger_diagnostics": diagnostics}, handle)
        os.replace(tmp, args.out)

    node.create_subscription(ExecutionResult, "execution_results", on_result, READER_QOS)
    node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, DIAGNOSTICS_QOS)
    node.create_timer(0.2, dump)
    spin(node)


def ground(args) -> None:
    node = rclpy.create_node("bench_ingest_planner")
    client = node.create_client(GroundingQuery, "ground")
    request = GroundingQuery.Request(skill_id="manipulation.grasp", target_class="object_0",
                                     environment="env_0")
    def call() -> None:
        if client.service_is_ready():
            client.call_async(request)

    node.create_timer(1.0 / args.rate, call)
    spin(node)


def spin(node) -> None:
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("publish")
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--subscribers", type=int, default=2)
    p.add_argument("--tag", required=True)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--invalid", action="store_true")
    n = verbs.add_parser("noop")
    n.add_argument("--out", required=True)
    g = verbs.add_parser("ground")
    g.add_argument("--rate", type=float, default=20.0)
    args = parser.parse_args()
    rclpy.init()
    try:
        {"publish": publish, "noop": noop, "ground": ground}[args.verb](args)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()

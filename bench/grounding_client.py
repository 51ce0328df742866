"""The measuring client of the grounding benchmark, in its own process.

Waits until `ground` serves, warms both paths up, prints `ready` and waits for a line
on stdin (the parent notes the store's counters meanwhile), then alternates `ground`
and `echo_ground` requests with the same content, timing each round trip with
perf_counter around call_async + a wait on an Event (the node spins in its own
executor thread). Writes the samples as JSON to --out, then prints `done`.
--allow-analogies and --property NAME=VALUE (repeatable) ask for analogies about a target
measured so.

    python -m bench.grounding_client --skill S --target T --environment E --out FILE
                                     [--allow-analogies --property mass_kg=0.42]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import rclpy
from rclpy.executors import SingleThreadedExecutor

from robot_memory.msg import KeyValue
from robot_memory.srv import GroundingQuery

STARTUP_TIMEOUT_S = 180.0
STATUS_NAMES = {GroundingQuery.Response.OK: "OK", GroundingQuery.Response.ABSTAIN: "ABSTAIN",
                GroundingQuery.Response.IDENTITY_UNVERIFIED: "IDENTITY_UNVERIFIED",
                GroundingQuery.Response.INVALID_REQUEST: "INVALID_REQUEST",
                GroundingQuery.Response.ANALOGY: "ANALOGY"}


def call(client, request, timeout_s: float = 5.0) -> tuple[float, GroundingQuery.Response]:
    """(round trip in seconds, response); the executor thread completes the future."""
    done = threading.Event()
    started = time.perf_counter()
    future = client.call_async(request)
    future.add_done_callback(lambda _future: done.set())
    if not done.wait(timeout_s):
        raise TimeoutError(f"{client.srv_name} did not answer within {timeout_s} s")
    return time.perf_counter() - started, future.result()


def connect(node, name: str):
    client = node.create_client(GroundingQuery, name)
    if not client.wait_for_service(timeout_sec=STARTUP_TIMEOUT_S):
        raise TimeoutError(f"service {name} not found within {STARTUP_TIMEOUT_S} s")
    return client


def wait_until_serving(ground, request) -> None:
    """`ground` answers IDENTITY_UNVERIFIED until it has verified and loaded the facts."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        _, response = call(ground, request, timeout_s=30.0)
        if response.status != GroundingQuery.Response.IDENTITY_UNVERIFIED:
            return
        time.sleep(0.2)
    raise TimeoutError(f"ground was not serving within {STARTUP_TIMEOUT_S} s")


def interleaved(ground, echo, request, requests: int) -> dict:
    """R round trips to each, alternating and swapping who goes first each pair, so
    both see the same moments of load and noise."""
    samples: dict[str, list[float]] = {"ground": [], "echo": []}
    statuses: Counter[str] = Counter()
    for i in range(requests):
        for name, client in ((("ground", ground), ("echo", echo)) if i % 2 == 0
                             else (("echo", echo), ("ground", ground))):
            elapsed, response = call(client, request)
            samples[name].append(elapsed)
            if name == "ground":
                statuses[STATUS_NAMES.get(response.status, str(response.status))] += 1
    return {"ground_s": samples["ground"], "echo_s": samples["echo"],
            "ground_statuses": dict(statuses)}


def measured_property(text: str) -> tuple[str, float]:
    """NAME=VALUE, as --property takes it."""
    name, _, value = text.partition("=")
    return name, float(value)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skill", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--environment", required=True)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warm-up", type=int, default=50)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--allow-analogies", action="store_true")
    parser.add_argument("--property", type=measured_property, action="append", default=[],
                        help="NAME=VALUE measured on the target (target_properties)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    rclpy.init()
    node = rclpy.create_node("bench_grounding_client")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    try:
        ground, echo = connect(node, "ground"), connect(node, "echo_ground")
        request = GroundingQuery.Request(skill_id=args.skill, target_class=args.target,
                                         environment=args.environment, requester="bench",
                                         intent_id="bench",
                                         allow_analogies=args.allow_analogies,
                                         target_properties=[KeyValue(key=name, value=value)
                                                            for name, value in args.property])
        wait_until_serving(ground, request)
        interleaved(ground, echo, request, args.warm_up)
        print("ready", flush=True)
        sys.stdin.readline()
        started = time.monotonic()
        result = interleaved(ground, echo, request, args.requests)
        result["seconds"] = time.monotonic() - started
        args.out.write_text(json.dumps(result))
        print("done", flush=True)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()

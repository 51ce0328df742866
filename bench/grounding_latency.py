"""Grounding round trip vs. a do-nothing service of the same types, under load.

With N events and ~M facts in the store, the real stack running, and a publisher
feeding new results (so the logger ingests and the consolidator runs passes that
republish the facts), a client alternates `ground` and `echo_ground` requests and times
each round trip. Target: ground p99 within 1.5x of echo p99. Also times
GroundingIndex.lookup alone, in process.

    python -m bench.grounding_latency [--events 1000000] [--targets 2500] [--requests 2000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import rclpy
from rclpy.executors import MultiThreadedExecutor

from bench.stats import summary_ms, write_result
from bench.stores import IDENTITY, MANIFEST, cached_store, working_copy
from robot_memory.bringup import Stack
from robot_memory.grounding import GroundingIndex, GroundingRequest
from robot_memory.srv import GroundingQuery
from robot_memory.store import MemoryStore

TARGET_RATIO = 1.5


def lookup_alone(url: str, lookups: int, targets: int) -> dict:
    index = GroundingIndex(IDENTITY, MemoryStore(url).partition(IDENTITY).facts())
    requests = [GroundingRequest("manipulation.grasp", f"object_{i % targets}", "env_0")
                for i in range(1000)]
    samples = []
    for i in range(lookups):
        started = time.perf_counter()
        index.lookup(requests[i % len(requests)])
        samples.append(time.perf_counter() - started)
    return {"facts": index.size, **summary_ms(samples)}


def timed_call(client, request, timeout: float = 5.0) -> float:
    done = threading.Event()
    started = time.perf_counter()
    future = client.call_async(request)
    future.add_done_callback(lambda _f: done.set())
    if not done.wait(timeout):
        raise TimeoutError(f"{client.srv_name} did not answer within {timeout} s")
    elapsed = time.perf_counter() - started
    if future.result() is None:
        raise RuntimeError(f"{client.srv_name} returned no response")
    return elapsed


def measure(requests: int, targets: int) -> tuple[dict, dict, dict]:
    rclpy.init()
    node = rclpy.create_node("bench_grounding_client")
    executor = MultiThreadedExecutor(num_threads=2)
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    ground = node.create_client(GroundingQuery, "ground")
    echo = node.create_client(GroundingQuery, "echo_ground")
    for client in (ground, echo):
        if not client.wait_for_service(timeout_sec=120):
            raise RuntimeError(f"{client.srv_name} never came up")
    request = GroundingQuery.Request(skill_id="manipulation.grasp", target_class="object_42",
                                     environment="env_0", requester="bench",
                                     intent_id="bench")
    deadline = time.monotonic() + 120
    while True:  # the server answers IDENTITY_UNVERIFIED until it has loaded the facts
        if time.monotonic() > deadline:
            raise TimeoutError("ground never answered OK within 120 s")
        future = ground.call_async(request)
        waited = time.monotonic() + 5
        while not future.done() and time.monotonic() < waited:
            time.sleep(0.01)
        if future.done() and future.result().status == GroundingQuery.Response.OK:
            break
        time.sleep(0.2)
    status = future.result().status
    for _ in range(50):  # warm up both paths
        timed_call(ground, request)
        timed_call(echo, request)
    ground_s, echo_s = [], []
    for _ in range(requests):
        ground_s.append(timed_call(ground, request))
        echo_s.append(timed_call(echo, request))
    executor.shutdown()
    rclpy.try_shutdown()
    return summary_ms(ground_s), summary_ms(echo_s), {"first_answer_status": int(status)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--targets", type=int, default=2500,
                        help="objects; facts ~ 4 x targets (2 environments, 4 kinds)")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--load-rate", type=float, default=200.0)
    parser.add_argument("--out")
    args = parser.parse_args()
    os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 50))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

    cached = cached_store(args.events, args.targets)
    with tempfile.TemporaryDirectory(prefix="bench_grounding_") as scratch:
        url = working_copy(cached, Path(scratch))
        alone = lookup_alone(url, 100_000, args.targets)
        log = open(Path(scratch) / "nodes.log", "wb")
        stack = Stack({"database_url": url, "manifest_path": str(MANIFEST),
                       "certified_hash": IDENTITY, "period_s": 1.0,
                       "pass_after_new_events": 200, "verify_store_on_boot": False},
                      log_level="warn").start(stdout=log, stderr=log)
        helpers = [subprocess.Popen([sys.executable, "-m", "bench.echo_grounding_server"]),
                   subprocess.Popen([sys.executable, "-m", "bench.load_publisher", "--rate",
                                     str(args.load_rate), "--targets", str(args.targets)])]
        try:
            ground, echo, extra = measure(args.requests, args.targets)
            facts_in_store = len(MemoryStore(url).partition(IDENTITY).facts())
        finally:
            for process in helpers:
                process.terminate()
                process.wait(10)
            stack.stop()
            log.close()
    ratio = ground["p99_ms"] / echo["p99_ms"]
    result = {"events": args.events, "facts": facts_in_store, "load_rate_per_s": args.load_rate,
              "ground": ground, "echo": echo, "p99_ratio": round(ratio, 3),
              "target_p99_ratio": TARGET_RATIO, "meets_target": ratio <= TARGET_RATIO,
              "lookup_alone": alone, **extra}
    path = write_result("grounding_latency", result, args.out)
    print(f"ground p50 {ground['p50_ms']} ms p99 {ground['p99_ms']} ms max {ground['max_ms']} ms"
          f" | echo p50 {echo['p50_ms']} ms p99 {echo['p99_ms']} ms max {echo['max_ms']} ms"
          f" | p99 ratio {ratio:.2f} (target <= {TARGET_RATIO})"
          f" | lookup alone p50 {alone['p50_ms'] * 1000:.1f} us | {path}")


if __name__ == "__main__":
    main()

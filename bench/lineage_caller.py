"""A planner asking for the lineage of an action while `ground` is measured, in its own
process: calls the `explain` service with an intent_id at --rate per second until
stopped, and writes how many answers came back (found or not) to --out.

The intent it asks about is the one the measuring client (bench.grounding_client) sends
with every request, so the lineage read is the largest the index holds: the newest
MAX_LINEAGE_EVENTS consultations of that intent, each parsed and rendered.

    python -m bench.lineage_caller --rate 10 --intent bench --out FILE
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from pathlib import Path

import rclpy
from rclpy.executors import SingleThreadedExecutor

from robot_memory.srv import ExplainFact

STARTUP_TIMEOUT_S = 180.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, required=True, help="explain calls per second")
    parser.add_argument("--intent", default="bench")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    rclpy.init()
    node = rclpy.create_node("bench_lineage_caller")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    counts = {"calls": 0, "found": 0, "not_found": 0, "seconds": []}
    try:
        client = node.create_client(ExplainFact, "explain")
        if not client.wait_for_service(timeout_sec=STARTUP_TIMEOUT_S):
            raise TimeoutError("service explain not found")
        period = 1.0 / args.rate
        next_call = time.monotonic()
        while not stop.is_set():
            done = threading.Event()
            started = time.perf_counter()
            future = client.call_async(ExplainFact.Request(intent_id=args.intent))
            future.add_done_callback(lambda _f: done.set())
            if done.wait(30.0) and not stop.is_set():
                counts["calls"] += 1
                counts["found" if future.result().found else "not_found"] += 1
                counts["seconds"].append(time.perf_counter() - started)
            next_call += period
            stop.wait(max(0.0, next_call - time.monotonic()))
    finally:
        seconds = sorted(counts.pop("seconds"))
        counts["median_ms"] = round(1000 * seconds[len(seconds) // 2], 3) if seconds else None
        args.out.write_text(json.dumps(counts))
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()

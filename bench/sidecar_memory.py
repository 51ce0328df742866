"""Resident memory of the whole sidecar: four node processes vs. all four in one process.

With N events and ~M facts in the store, the stack runs in each mode in turn while a
publisher feeds results at a steady rate (the logger ingests, the consolidator runs
passes, the grounding server applies their deltas). Once a pass has run in the mode
being measured, the RSS of every sidecar process is sampled for --duration seconds. The
baseline, in the same run, is a do-nothing rclpy node of the same imports as a service
(bench.echo_grounding_server). Goal (issue "One process for the whole sidecar"): the
whole sidecar at most 200 MB RSS at 10^6 events and 10^4 facts. This process only
orchestrates; it does not touch ROS.

    python -m bench.sidecar_memory [--events N] [--facts M] [--duration S]
                                   [--out bench/results/sidecar_memory.json]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import psutil

from bench.grounding_latency import (isolate_ros_traffic, nodes_log, start_helper,
                                     stop_helper)
from bench.stats import write_result
from bench.stores import IDENTITY, MANIFEST, cached_store, working_copy
from robot_memory.operation.bringup import Stack
from robot_memory.event_kinds import CONSOLIDATION_RUN, EXECUTION_RESULT
from robot_memory.store import MemoryStore

GOAL_MB = 200.0
MB = 1024 * 1024
SAMPLE_PERIOD_S = 0.5


def rss_mb(pid: int) -> float:
    try:
        return psutil.Process(pid).memory_info().rss / MB
    except psutil.NoSuchProcess:
        return 0.0


def counts(url: str) -> tuple[int, int]:
    partition = MemoryStore(url).partition(IDENTITY)
    return partition.count_events(EXECUTION_RESULT), partition.count_events(CONSOLIDATION_RUN)


def wait_for_work(url: str, stack: Stack, timeout_s: float) -> float:
    """Until the logger stored new results and the consolidator ran a pass; seconds."""
    started = time.monotonic()
    results, runs = counts(url)
    while time.monotonic() - started < timeout_s:
        if stack.exited():
            raise RuntimeError(f"sidecar process(es) exited: {stack.exited()}")
        now_results, now_runs = counts(url)
        if now_results > results and now_runs > runs:
            return time.monotonic() - started
        time.sleep(0.5)
    raise RuntimeError(f"no new results and pass within {timeout_s} s")


def measure_mode(url: str, one_process: bool, args: argparse.Namespace, log) -> dict:
    stack = Stack({"database_url": url, "manifest_path": str(MANIFEST),
                   "certified_hash": IDENTITY, "period_s": 1.0,
                   "verify_store_on_boot": False, "full_check_after_boot": False,
                   "growth_limit_mb": 0.0, "hard_limit_mb": 0.0,
                   # The store this measures keeps its size: retention is bench.lifetime's.
                   "retain_events": 0},
                  log_level="warn", one_process=one_process).start(stdout=log, stderr=log)
    try:
        ready_s = wait_for_work(url, stack, args.timeout)
        samples: dict[str, list[float]] = {name: [] for name in stack.processes}
        totals = []
        deadline = time.monotonic() + args.duration
        while time.monotonic() < deadline:
            values = {name: rss_mb(p.pid) for name, p in stack.processes.items()}
            for name, value in values.items():
                samples[name].append(value)
            totals.append(sum(values.values()))
            time.sleep(SAMPLE_PERIOD_S)
        if stack.exited():
            raise RuntimeError(f"sidecar process(es) exited: {stack.exited()}")
    finally:
        stack.stop()
    return {"processes": {name: {"peak_mb": round(max(v), 1), "last_mb": round(v[-1], 1)}
                          for name, v in samples.items()},
            "total_peak_mb": round(max(totals), 1), "total_last_mb": round(totals[-1], 1),
            "ready_after_s": round(ready_s, 1), "samples": len(totals)}


def run(args: argparse.Namespace) -> dict:
    cached = cached_store(args.events, args.facts)
    result = {"events": args.events, "facts_requested": args.facts,
              "load_rate_per_s": args.load_rate, "duration_s": args.duration}
    with tempfile.TemporaryDirectory(prefix="bench_sidecar_memory_") as scratch:
        with nodes_log(Path(scratch) / "nodes.log") as log:
            baseline = start_helper("bench.echo_grounding_server", log=log)
            load = start_helper("bench.load_publisher", "--rate", str(args.load_rate),
                                "--facts", str(args.facts), "--start", str(args.events),
                                log=log)
            try:
                for mode, one_process in (("four_processes", False), ("one_process", True)):
                    directory = Path(scratch) / mode
                    directory.mkdir()
                    url = working_copy(cached, directory)
                    result[mode] = measure_mode(url, one_process, args, log)
                result["baseline_rclpy_node_mb"] = round(rss_mb(baseline.pid), 1)
            finally:
                stop_helper(load)
                stop_helper(baseline)
    four, one = result["four_processes"]["total_peak_mb"], result["one_process"]["total_peak_mb"]
    result.update({"one_over_four": round(one / four, 3), "goal_mb": GOAL_MB,
                   "one_process_meets_goal": one <= GOAL_MB,
                   "one_process_over_baseline": round(one / result["baseline_rclpy_node_mb"],
                                                      2)})
    return result


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--duration", type=float, default=20.0,
                        help="seconds of RSS sampling per mode, after the first pass")
    parser.add_argument("--load-rate", type=float, default=200.0,
                        help="execution results per second during the run")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds to wait for the first pass in each mode")
    parser.add_argument("--out")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    isolate_ros_traffic()
    result = run(args)
    path = write_result("sidecar_memory", result, args.out)
    print(f"{result['events']} events, ~{result['facts_requested']} facts; baseline rclpy "
          f"node {result['baseline_rclpy_node_mb']} MB")
    for mode in ("four_processes", "one_process"):
        each = ", ".join(f"{name} {v['peak_mb']}" for name, v in
                         result[mode]["processes"].items())
        print(f"  {mode:15} total peak {result[mode]['total_peak_mb']} MB ({each})")
    print(f"  one process / four: {result['one_over_four']}; goal <= {GOAL_MB} MB: "
          f"{'met' if result['one_process_meets_goal'] else 'MISSED'}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

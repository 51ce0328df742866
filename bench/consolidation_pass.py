"""Consolidation pass cost: a full pass over 10^5 events against the seed paper's 309 ms,
and the cost of an incremental pass over 1,000 new events on top of stores of 10^5 and
10^6 already-consolidated events (it should not depend on the store size).

    python -m bench.consolidation_pass [--full-events 100000] [--trials 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench.stats import write_result
from bench.stores import IDENTITY, append_results, cached_store, working_copy
from robot_memory.consolidation import consolidation_pass
from robot_memory.store import MemoryStore

SEED_PAPER_MS_AT_1E5 = 309.0


def timed_pass(url: str) -> tuple[float, int]:
    partition = MemoryStore(url).partition(IDENTITY)
    started = time.perf_counter()
    report = consolidation_pass(partition)
    return time.perf_counter() - started, report.events_read


def full_pass(events: int, targets: int, trials: int) -> dict:
    raw = cached_store(events, targets, consolidated=False)
    times = []
    for _ in range(trials):
        with tempfile.TemporaryDirectory(prefix="bench_pass_") as scratch:
            seconds, read = timed_pass(working_copy(raw, Path(scratch)))
            assert read == events
            times.append(seconds)
    median_ms = statistics.median(times) * 1000
    return {"events": events, "trials_ms": [round(t * 1000, 1) for t in times],
            "median_ms": round(median_ms, 1), "seed_paper_ms": SEED_PAPER_MS_AT_1E5,
            "speedup_vs_seed": round(SEED_PAPER_MS_AT_1E5 / median_ms, 3),
            "target_speedup": 3.0, "meets_target": SEED_PAPER_MS_AT_1E5 / median_ms >= 3.0}


def incremental_pass(store_events: int, new_events: int, targets: int, trials: int) -> dict:
    base = cached_store(store_events, targets)
    times = []
    for _ in range(trials):
        with tempfile.TemporaryDirectory(prefix="bench_incr_") as scratch:
            url = working_copy(base, Path(scratch))
            append_results(url, store_events, new_events, targets)
            seconds, read = timed_pass(url)
            assert read == new_events
            times.append(seconds)
    return {"store_events": store_events, "new_events": new_events,
            "trials_ms": [round(t * 1000, 1) for t in times],
            "median_ms": round(statistics.median(times) * 1000, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full-events", type=int, default=100_000)
    parser.add_argument("--small-store", type=int, default=100_000)
    parser.add_argument("--large-store", type=int, default=1_000_000)
    parser.add_argument("--new-events", type=int, default=1000)
    parser.add_argument("--targets", type=int, default=2500)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--out")
    args = parser.parse_args()
    full = full_pass(args.full_events, args.targets, args.trials)
    small = incremental_pass(args.small_store, args.new_events, args.targets, args.trials)
    large = incremental_pass(args.large_store, args.new_events, args.targets, args.trials)
    ratio = large["median_ms"] / small["median_ms"]
    result = {"full_pass": full, "incremental_small_store": small,
              "incremental_large_store": large,
              "incremental_large_over_small": round(ratio, 3)}
    path = write_result("consolidation_pass", result, args.out)
    print(f"full pass over {full['events']} events: {full['median_ms']} ms median "
          f"({full['speedup_vs_seed']}x the seed's {SEED_PAPER_MS_AT_1E5} ms; target 3x) | "
          f"{args.new_events} new events on {args.small_store}: {small['median_ms']} ms, on "
          f"{args.large_store}: {large['median_ms']} ms (ratio {ratio:.2f}) | {path}")


if __name__ == "__main__":
    main()

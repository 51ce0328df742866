"""`robot-memory report` on a 10^5-event store: goal under 10 s.

Measured as the user runs it, a whole `robot-memory report` process (interpreter start,
imports, reading the store, drawing the figures, writing the file), beside a baseline in
the same run: a whole `robot-memory facts --json` process on the same store (the text
answer the report replaces). Also the in-process build time, split into reading the
store and drawing.

    python -m bench.report [--events 100000] [--facts 1000] [--trials 3]
                           [--out bench/results/report.json]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.stats import trials_ms, write_result
from bench.stores import IDENTITY, cached_store, working_copy

GOAL_S = 10.0


def cli_seconds(*args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "robot_memory.cli", *args],
                          capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"robot-memory {args[0]} failed: {done.stderr.strip()}")
    return seconds


def in_process(url: str) -> dict:
    from robot_memory.report.page import build_report
    from robot_memory.report.data import read_report_data
    from robot_memory.store import MemoryStore
    partition = MemoryStore(url).partition(IDENTITY)
    started = time.perf_counter()
    read_report_data(partition)
    read_s = time.perf_counter() - started
    started = time.perf_counter()
    page = build_report(partition)
    build_s = time.perf_counter() - started
    return {"read_store_ms": round(read_s * 1000, 1), "build_report_ms": round(build_s * 1000, 1),
            "html_bytes": len(page)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--facts", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args()
    store = cached_store(args.events, args.facts)
    with tempfile.TemporaryDirectory(prefix="bench_report_") as scratch:
        url = working_copy(store, Path(scratch))
        common = ["--db", url, "--identity", IDENTITY]
        out = str(Path(scratch) / "report.html")
        cli_seconds("report", "--out", out, *common)  # warm the file cache and font cache
        report_s, facts_s = [], []
        for _ in range(args.trials):
            report_s.append(cli_seconds("report", "--out", out, *common))
            facts_s.append(cli_seconds("facts", "--json", *common))
        inside = in_process(url)
    report, facts = trials_ms(report_s), trials_ms(facts_s)
    median_s = statistics.median(report_s)
    result = {"events": args.events, "facts_requested": args.facts,
              "report_cli": report, "baseline_facts_json_cli": facts,
              "ratio_report_to_facts_json": round(median_s / statistics.median(facts_s), 2),
              "in_process": inside, "goal_s": GOAL_S, "meets_goal": median_s < GOAL_S}
    path = write_result("report", result, args.out)
    print(f"report of a {args.events}-event store: median {median_s:.2f} s (goal < {GOAL_S} s), "
          f"{result['ratio_report_to_facts_json']}x `facts --json`; written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Ingest: what the logger stores vs. what a do-nothing subscriber receives, per rate.

For each process mode, the stack (`robot_memory.operation.bringup.Stack`, the consolidator on
its defaults: a pass every period_s, 10 s, and sooner once pass_after_new_events
results wait) runs on a SQLite store that already holds --history results (2*10^5 by
default, consolidated: a robot's store after some days; a fresh store hides what the
append costs once its tables are large) beside a do-nothing rclpy subscriber with
the logger's QoS (the baseline, its own process) and a planner calling `ground` at
20 Hz. For each rate a publisher process sends rate x seconds results on
`execution_results`; then we wait until the store stops growing and read: sent,
received by the no-op subscriber, stored by the logger, the logger's loss counts by
cause (its /diagnostics, via the no-op process), the logger process's CPU seconds
(psutil) and the RSS of every process. This process only orchestrates.

Goals (docs/architecture.md): stored / no-op received >= 0.99 at every rate up to 2000/s; the
logger at most 0.1 core at 1000/s (four processes) and the whole sidecar at most 0.2 core
(one process). Also checked: stored + counted losses == sent, exactly. For comparison,
the one-process sidecar at 1000/s is measured again with a pass every second
(`one_process_passes_every_second`, period_s 1 and pass_after_new_events 1000).

Then a flood of invalid results (force_n = NaN) at --invalid-rate: every one must be
counted as rejected (non_finite_value), none stored; recorded are the logger's CPU per
1000 rejected and how many log lines the flood cost (at most one a second).

Last, with no stack running, the logger's CPU per result without DDS or competition
(bench.ingest_cost: intake, writer, and the store's rows alone), which with the DDS
threads' live CPU gives the budget at 1000/s (cpu_budget_at_1000).

    python -m bench.ingest [--seconds 30] [--rates 50,100,200,400,1000,2000]
                           [--modes four_process,one_process] [--invalid-rate 1000]
                           [--history 200000] [--out FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from bench import ingest_cost
from bench.grounding_latency import isolate_ros_traffic, nodes_log, start_helper, stop_helper
from bench.stats import write_result
from bench.stores import IDENTITY, MANIFEST, cached_store, working_copy
from robot_memory.operation.bringup import Stack
from robot_memory.event_kinds import EXECUTION_RESULT
from robot_memory.operation.parameters import node_defaults
from robot_memory.store import MemoryStore

RATES = (50, 100, 200, 400, 1000, 2000)
MODES = ("four_process",)
GOAL_RATIO, GOAL_CORES, GOAL_RATE = 0.99, 0.1, 1000
GOAL_SIDECAR_CORES = 0.2  # the four nodes in one process
PASSES_EVERY_SECOND = {"period_s": 1.0, "pass_after_new_events": 1000}
HISTORY = 200_000  # results the store holds before the first rate
HISTORY_FACTS = 1000  # the publishers' key space (bench.ingest_peers)
LOSS_KEYS = ("backlog_full", "dds_lost", "store_error")


def stack_supports(mode: str) -> str | None:
    """Why `mode` cannot run with this Stack, or None."""
    if mode == "four_process":
        return None
    if mode == "one_process":
        if "one_process" in {f.name for f in dataclasses.fields(Stack)}:
            return None
        return "robot_memory.operation.bringup.Stack has no one_process field in this checkout"
    return f"unknown mode {mode!r}"


def start_stack(mode: str, url: str, log, consolidator: dict | None = None) -> Stack:
    # /diagnostics and the passes at their default periods, as users run the stack.
    overrides = {"database_url": url, "manifest_path": str(MANIFEST), "certified_hash": IDENTITY,
                 **(consolidator or {}), "verify_store_on_boot": False,
                 "full_check_after_boot": False, "growth_limit_mb": 0.0, "hard_limit_mb": 0.0,
                 # The store this measures keeps its size: retention is bench.lifetime's.
                 "retain_events": 0}
    extra = {"one_process": True} if mode == "one_process" else {}
    return Stack(overrides, log_level="warn", **extra).start(stdout=log, stderr=log)


def logger_process(stack: Stack) -> psutil.Process:
    """The process the logger runs in (the only one in one-process mode)."""
    process = stack.processes.get("episodic_logger") or next(iter(stack.processes.values()))
    return psutil.Process(process.pid)


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def store_counter(url: str):
    """count() -> execution results stored so far, on one store handle (opening a store
    per poll is slow enough to blur when the last result arrived)."""
    partition = MemoryStore(url).partition(IDENTITY)
    return lambda: partition.count_events(EXECUTION_RESULT)


def losses(diagnostics: dict) -> dict[str, int]:
    return {key.removeprefix("rejected."): int(value) for key, value in diagnostics.items()
            if key.startswith("rejected.")}


POLL_S = 0.25  # how often the store (or the no-op's count) is read while waiting
# Two of the logger's diagnostics periods, and the no-op's dump of what it heard.
DIAGNOSTICS_WAIT_S = 2 * node_defaults("episodic_logger")["diagnostics_period_s"] + 0.5


def settle(read, quiet_s: float = 1.5, timeout_s: float = 60.0):
    """Poll read() until it has not changed for quiet_s; return the last value and the
    monotonic time it was first seen."""
    value, since, deadline = read(), time.monotonic(), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(POLL_S)
        now = read()
        if now != value:
            value, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
    return value, since


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def rss_mb(processes: dict[str, psutil.Process]) -> dict[str, float]:
    out = {}
    for name, process in processes.items():
        try:
            out[name] = round(process.memory_info().rss / 2**20, 1)
        except psutil.Error:
            out[name] = None
    return out


def thread_cpu_seconds(process: psutil.Process, kind: str) -> float:
    """CPU seconds of the process's live threads of one kind: `dds` (the middleware's own
    threads, named dds.*: receiving, events) or `python` (the interpreter's threads:
    executor, intake, writer; Python does not name them)."""
    total = 0.0
    for thread in process.threads():
        try:
            name = Path(f"/proc/{process.pid}/task/{thread.id}/comm").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        if name.startswith("dds." if kind == "dds" else "python"):
            total += thread.user_time + thread.system_time
    return total


def publish_until_settled(rate: int, seconds: float, tag: str, start: int, log, read,
                          cpu_readers: list, extra: tuple[str, ...] = ()):
    """Publish rate x seconds results (bench.ingest_peers publish), then poll read() until
    it stops changing. Each of `cpu_readers` (CPU seconds of a process or some of its
    threads) is read when publishing starts and the first time read() shows each value,
    so they cover the work up to the last change, not the quiet wait after it. Returns
    (what the publisher reports, the last value, when it was first seen, when publishing
    started, CPU seconds per reader)."""
    publisher = subprocess.Popen(
        [sys.executable, "-m", "bench.ingest_peers", "publish", "--rate", str(rate),
         "--seconds", str(seconds), "--tag", tag, "--start", str(start), *extra],
        stdout=subprocess.PIPE, stderr=log, text=True)
    if publisher.stdout.readline().strip() != "publishing":
        stop_helper(publisher)
        raise RuntimeError(f"the publisher did not start (exit {publisher.returncode})")
    started, cpu_start = time.monotonic(), [cpu() for cpu in cpu_readers]
    cpu_seen, seen_at = {}, {}

    def read_noting_cpu():
        value = read()
        if value not in cpu_seen:
            cpu_seen[value], seen_at[value] = [cpu() for cpu in cpu_readers], time.monotonic()
        return value

    # read() is polled while the publisher runs too: otherwise the first time it shows
    # the final value is after the publisher has exited (its 2 s linger included), and
    # the CPU readings would count that quiet time.
    report: list[str] = []
    reader = threading.Thread(target=lambda: report.append(publisher.stdout.readline()),
                              daemon=True)
    reader.start()
    try:
        while reader.is_alive():
            read_noting_cpu()
            reader.join(POLL_S)
        sent = json.loads(report[0])
        # And while it lingers before exiting (2 s, so that its last samples are
        # acknowledged): the last results are stored meanwhile, and a read first made
        # after it exits would count those quiet seconds too.
        lingering_until = time.monotonic() + 60.0
        while publisher.poll() is None and time.monotonic() < lingering_until:
            read_noting_cpu()
            time.sleep(POLL_S)
    finally:
        stop_helper(publisher, grace_s=60.0)
    last, _ = settle(read_noting_cpu)
    return sent, last, seen_at[last], started, [c - s for c, s in zip(cpu_seen[last], cpu_start)]


def one_rate(rate: int, seconds: float, count_stored, noop_file: Path, logger: psutil.Process,
             noop: psutil.Process, start: int, log) -> dict:
    """One rate: publish, wait until the store stops growing, count."""
    tag = f"rate_{rate}"
    stored_before = count_stored()
    lost_before = losses(read_json(noop_file).get("logger_diagnostics", {}))
    sent, total, last_growth, started, (cpu, noop_cpu, python_cpu, dds_cpu) = \
        publish_until_settled(rate, seconds, tag, start, log, count_stored,
                              [lambda: cpu_seconds(logger), lambda: cpu_seconds(noop),
                               lambda: thread_cpu_seconds(logger, "python"),
                               lambda: thread_cpu_seconds(logger, "dds")])
    stored = total - stored_before
    busy_s = max(last_growth - started, sent["seconds"])
    received, _ = settle(lambda: read_json(noop_file).get("received", {}).get(tag, 0))
    time.sleep(DIAGNOSTICS_WAIT_S)  # so that the counts include this rate
    lost_after = losses(read_json(noop_file).get("logger_diagnostics", {}))
    counted = {k: v - lost_before.get(k, 0) for k, v in lost_after.items()
               if v - lost_before.get(k, 0)}
    return {"rate_per_s": rate, "sent": sent["sent"], "publish_seconds": sent["seconds"],
            "noop_received": received, "stored": stored,
            "stored_vs_noop": round(stored / received, 4) if received else None,
            "not_stored_by_cause": counted,
            "stored_plus_counted_equals_sent": stored + sum(counted.values()) == sent["sent"],
            "seconds_until_all_stored": round(busy_s, 2),
            "logger_cpu_s": round(cpu, 3),
            "logger_cpu_s_per_1000_stored": round(cpu / stored * 1000, 3) if stored else None,
            # the writer is done within a flush period of the last result: CPU over the
            # publishing time is the share of a core the stream took
            "logger_cores": round(cpu / sent["seconds"], 3),
            # of which the interpreter's threads and DDS's own (receiving) threads
            "logger_cores_python_threads": round(python_cpu / sent["seconds"], 3),
            "logger_cores_dds_threads": round(dds_cpu / sent["seconds"], 3),
            "noop_cpu_s_per_1000_received":
                round(noop_cpu / received * 1000, 3) if received else None,
            "logger_vs_noop_cpu": round(cpu / noop_cpu, 2) if noop_cpu > 0 else None}


def invalid_flood(rate: int, seconds: float, noop_file: Path, logger: psutil.Process,
                  start: int, log, log_path: Path) -> dict:
    """Publish results that are all invalid (NaN force); wait until the logger's rejected
    count stops growing; count, CPU and log lines."""
    def rejected() -> int:
        return losses(read_json(noop_file).get("logger_diagnostics", {})).get(
            "non_finite_value", 0)

    before, lines_before = rejected(), _lines_naming(log_path, "(reason non_finite_value)")
    sent, total, _, _, (cpu,) = publish_until_settled(
        rate, seconds, "invalid", start, log, rejected, [lambda: cpu_seconds(logger)],
        extra=("--invalid",))
    counted = total - before
    return {"rate_per_s": rate, "sent": sent["sent"], "publish_seconds": sent["seconds"],
            "rejected_non_finite_value": counted,
            "rejected_equals_sent": counted == sent["sent"],
            "logger_cpu_s_per_1000_rejected":
                round(cpu / counted * 1000, 3) if counted else None,
            "logger_cores": round(cpu / sent["seconds"], 3),
            "log_lines": _lines_naming(log_path, "(reason non_finite_value)") - lines_before}


def _lines_naming(path: Path, text: str) -> int:
    try:
        with open(path, errors="replace") as handle:
            return sum(1 for line in handle if text in line)
    except FileNotFoundError:
        return 0


def run_mode(mode: str, rates: list[int], seconds: float, scratch: Path,
             invalid_rate: int = 0, history: int = 0, consolidator: dict | None = None) -> dict:
    if history:
        (scratch / mode).mkdir(parents=True, exist_ok=True)
        url = working_copy(cached_store(history, HISTORY_FACTS), scratch / mode)
    else:
        url = f"sqlite:///{scratch / f'{mode}.db'}"
    noop_file = scratch / f"{mode}_noop.json"
    with nodes_log(scratch / f"{mode}.log") as log:
        stack = start_stack(mode, url, log, consolidator)
        helpers = {"noop": start_helper("bench.ingest_peers", "noop", "--out", str(noop_file),
                                        log=log),
                   "planner": start_helper("bench.ingest_peers", "ground", "--rate", "20",
                                           log=log)}
        try:
            logger, noop = logger_process(stack), psutil.Process(helpers["noop"].pid)
            processes = {name: psutil.Process(p.pid) for name, p in stack.processes.items()}
            processes.update({name: psutil.Process(p.pid) for name, p in helpers.items()})
            # The publishers go on where the history ends (results and event times).
            per_rate, start, count_stored = [], history, store_counter(url)
            for rate in rates:
                print(f"  {mode}: {rate}/s for {seconds} s", flush=True)
                result = one_rate(rate, seconds, count_stored, noop_file, logger, noop,
                                  start, log)
                result["rss_mb"] = rss_mb(processes)
                per_rate.append(result)
                start += result["sent"]
                print(f"    sent {result['sent']}, no-op {result['noop_received']}, stored "
                      f"{result['stored']}, not stored {result['not_stored_by_cause']}, "
                      f"logger {result['logger_cpu_s_per_1000_stored']} CPU s/1000",
                      flush=True)
            invalid = None
            if invalid_rate:
                print(f"  {mode}: invalid results, {invalid_rate}/s for {seconds} s", flush=True)
                invalid = invalid_flood(invalid_rate, seconds, noop_file, logger, start, log,
                                        scratch / f"{mode}.log")
                print(f"    sent {invalid['sent']}, rejected "
                      f"{invalid['rejected_non_finite_value']}, {invalid['log_lines']} log "
                      f"lines, logger {invalid['logger_cpu_s_per_1000_rejected']} CPU s/1000",
                      flush=True)
            if stack.exited():
                raise RuntimeError(f"stack processes exited during the run: {stack.exited()}")
            diagnostics = read_json(noop_file).get("logger_diagnostics", {})
        finally:
            for process in helpers.values():
                stop_helper(process)
            stack.stop()
    return {"rates": per_rate, "invalid_flood": invalid,
            "logger_diagnostics_at_end": diagnostics}


def verdicts(modes: dict) -> dict:
    out = {}
    for mode, result in modes.items():
        if "skipped" in result:
            continue
        rates = result["rates"]
        at = {r["rate_per_s"]: r for r in rates}
        # One process: the logger's process is the whole sidecar, held to its own goal.
        cpu_goal, goal_cores = (("sidecar_cpu_at_most_0_2_core_at_1000", GOAL_SIDECAR_CORES)
                                if mode == "one_process" else
                                ("cpu_at_most_0_1_core_at_1000", GOAL_CORES))
        out[mode] = {
            "stored_vs_noop_at_least_0_99_every_rate_to_2000": all(
                r["stored_vs_noop"] is not None and r["stored_vs_noop"] >= GOAL_RATIO
                for r in rates if r["rate_per_s"] <= 2000),
            cpu_goal: (at[GOAL_RATE]["logger_cores"] <= goal_cores)
            if GOAL_RATE in at else None,
            "stored_plus_counted_equals_sent_every_rate": all(
                r["stored_plus_counted_equals_sent"] for r in rates),
            "invalid_flood_every_result_counted": (
                result["invalid_flood"]["rejected_equals_sent"]
                if result.get("invalid_flood") else None)}
    return out


def cpu_budget(modes: dict, standalone: dict) -> dict:
    """The logger's CPU at GOAL_RATE against the goal: live (the default mode's run), and
    rebuilt from its parts measured without DDS or competition (bench.ingest_cost) plus
    the DDS threads' CPU measured live. store_rows_only_and_dds_cores is what any logger
    keeping this store spends at the least: the rows alone and DDS, before taking,
    reading, validating or hashing a result. Cores = µs per result x GOAL_RATE / 10^6."""
    at = {r["rate_per_s"]: r for r in modes.get("four_process", {}).get("rates", [])}
    live = at.get(GOAL_RATE)
    if live is None:
        return {"standalone": standalone}
    dds = live["logger_cores_dds_threads"]
    cores = GOAL_RATE / 1e6
    python_us = standalone["intake_us_per_result"] + standalone["writer_us_per_result"]
    return {"goal_cores": GOAL_CORES, "rate_per_s": GOAL_RATE,
            "live_cores": live["logger_cores"], "live_dds_threads_cores": dds,
            "standalone": standalone,
            "standalone_and_dds_cores": round(dds + python_us * cores, 3),
            "store_rows_only_and_dds_cores": round(
                dds + standalone["store_rows_only_us_per_result"] * cores, 3)}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0,
                        help="publishing time per rate (a few of the default 10 s passes)")
    parser.add_argument("--rates", default=",".join(map(str, RATES)))
    parser.add_argument("--modes", default="four_process,one_process",
                        help="four_process and/or one_process (skipped, with a note, where "
                             "Stack has no one_process field)")
    parser.add_argument("--invalid-rate", type=int, default=1000,
                        help="rate of the invalid-results flood after the rates (0: none)")
    parser.add_argument("--history", type=int, default=HISTORY,
                        help="results the store holds before the first rate (0: a fresh "
                             "store)")
    parser.add_argument("--out")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    isolate_ros_traffic()
    if os.environ.get("RM_TEST_ROS_DOMAIN_ID"):  # a checkout's own domain, when given
        os.environ["ROS_DOMAIN_ID"] = os.environ["RM_TEST_ROS_DOMAIN_ID"]
    rates = [int(r) for r in args.rates.split(",")]
    modes: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench_ingest_") as scratch:
        for mode in args.modes.split(","):
            why_not = stack_supports(mode)
            if why_not:
                print(f"{mode}: skipped ({why_not})", flush=True)
                modes[mode] = {"skipped": why_not}
                continue
            modes[mode] = run_mode(mode, rates, args.seconds, Path(scratch),
                                   args.invalid_rate, args.history)
        every_second = None
        if "rates" in modes.get("one_process", {}) and GOAL_RATE in rates:
            print(f"one_process, a pass every second: {GOAL_RATE}/s", flush=True)
            every_second = run_mode("one_process", [GOAL_RATE], args.seconds,
                                    Path(scratch) / "every_second", 0, args.history,
                                    PASSES_EVERY_SECOND)
            every_second = {"consolidator": PASSES_EVERY_SECOND,
                            "sidecar_cores": every_second["rates"][0]["logger_cores"],
                            **every_second}
    goals = verdicts(modes)
    print("the logger's CPU per result without DDS or competition (bench.ingest_cost)",
          flush=True)
    budget = cpu_budget(modes, ingest_cost.measure())
    path = write_result("ingest", {"seconds_per_rate": args.seconds, "rates_per_s": rates,
                                   "history_results": args.history,
                                   "goal_stored_vs_noop": GOAL_RATIO,
                                   "goal_cores_at_1000": GOAL_CORES,
                                   "goal_sidecar_cores_at_1000": GOAL_SIDECAR_CORES,
                                   "modes": modes,
                                   "one_process_passes_every_second": every_second,
                                   "goals": goals, "cpu_budget_at_1000": budget}, args.out)
    print(json.dumps(budget, indent=2))
    print(json.dumps(goals, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

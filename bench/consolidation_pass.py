"""Consolidation pass cost, against the goals of the set-based pass (and the paper
"Episodic-to-Semantic Consolidation Without Identity Drift", Table 5: 309 ms median for a
full pass over 10^5 rows, 60-75 MB RSS).

(a) Full pass over 10^5 events of a seed-shaped stream (two skills, a handful of facts):
    goal <= 100 ms median. Also timed with the per-event engine it replaced (the tests'
    oracle, test/oracle_consolidation.py), for the speedup in the same run.
(b) Full pass over 10^5 events on a 10^4-fact key space, against a bare SQLite
    `GROUP BY skill, target, environment, success` over the same 10^5 rows (a plain
    table of those four typed columns) in the same run: goal ratio <= 1 (and <= 3, the
    goal under a robot's load).
(c) Incremental pass after 10^3 new events on a consolidated 10^6-event store: goal
    <= 0.05x the full pass over 10^6 (from (d)) and < 30 ms. Timed in the node's steady
    state: the store is held open and has had a pass over 10^3 earlier new results, so
    the statements are compiled and the caches warm (warm_pass_seconds). Measured on the
    10^4-fact key space (the goals) and, beside it, on the seed-shaped stream against its
    own full pass over 10^6.
(d) Scaling table, 10^2 .. 10^6 events on the 10^4-fact key space, in the shape of the
    paper's Table 5: median and p90 of 9 trials (a 10th, cold, trial discarded), RSS of
    the measuring process before the first pass (baseline) and at its peak, fact rows.
    Each size runs in its own process, so one size's memory never counts for another.
    Memory goal: peak <= 120 MB at 10^6 events with 10^4 facts.
(e) The store's own work for the passes of (b) and (c), with the rules' computation
    taken out (store_work_only): the pass's reads, drained, and its commit of results
    computed beforehand. It bounds what any engine for these rules on this store can do;
    goals_within_store_work says which goals it leaves room for.
Every trial runs on a fresh copy of a cached store (bench/stores.py), untimed. The
incremental trials and the scaling rows also record reference_loop_ms: a fixed Python
loop run just before each pass, to tell a slow trial from a slow machine.

Every pass is timed as the consolidator node runs it: on a store the process holds open
(MemoryStore keep_open), whose commits do not checkpoint SQLite's write-ahead log; the
node checkpoints it after the pass, once the new facts are published. That checkpoint
(copying what the pass wrote back into the database file, and syncing it) is timed on
its own and reported beside each pass as checkpoint_after_median_ms: the pass's figures
and ratios leave it out, full and incremental passes alike. (Until this, a pass on a
store that nothing else held open paid it as it closed its connection, and a full pass
in the commit that left the log over 1000 pages.)

    python -m bench.consolidation_pass [--trials 9] [--large-store 1000000]
"""

from __future__ import annotations

import argparse
import json
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import numpy as np
import psutil

from bench.stats import python_loop_ms, write_result
from bench.stores import IDENTITY, KeySpace, append_results, cached_store, working_copy
from robot_memory.consolidation import consolidation_pass
from robot_memory.consolidation.consolidation_pass import collector_paused, commit, plan_pass
from robot_memory.consolidation.rules import RulesConfig
from robot_memory.store import MemoryStore, Partition

SEED_PAPER_MS = 309.0  # Table 5: median full pass at 10^5 rows
SEED_PAPER_RSS_MB = (60, 75)
FULL_PASS_GOAL_MS = 100.0
INCREMENTAL_GOAL_MS = 30.0
INCREMENTAL_GOAL_RATIO = 0.05
# The key-space full pass against the bare GROUP BY: the set-based pass's first goal (1x)
# and the goal of the tails under a robot's load (3x).
KEY_SPACE_GOAL_RATIO = 1.0
KEY_SPACE_LOAD_GOAL_RATIO = 3.0
MEMORY_GOAL_MB = 120.0
SEED_SHAPED_FACTS = 10
KEY_SPACE_FACTS = 10_000
MB = 1024 * 1024


def open_partition(url: str) -> Partition:
    """The store held open between passes, as the consolidator node holds it."""
    return MemoryStore(url, keep_open=True).partition(IDENTITY)


def timed(action: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    outcome = action()
    return time.perf_counter() - started, outcome


def stats_ms(samples_s: list[float]) -> dict:
    """Median and p90 of the trials (the cold one already dropped), in ms."""
    values = np.asarray(samples_s) * 1000.0
    return {"trials_ms": [round(float(v), 2) for v in values],
            "median_ms": round(float(np.median(values)), 2),
            "p90_ms": round(float(np.percentile(values, 90)), 2)}


def on_fresh_copies(store: Path, trials: int, prepare: Callable[[str], None],
                    measure: Callable[[str], float]) -> list[float]:
    """measure(url) on a new scratch copy per trial (prepare(url) runs untimed first);
    the first, cold, trial is discarded."""
    samples = []
    for _ in range(trials + 1):
        with tempfile.TemporaryDirectory(prefix="bench_pass_") as scratch:
            url = working_copy(store, Path(scratch))
            prepare(url)
            samples.append(measure(url))
    return samples[1:]


def full_pass_seconds(expect_events: int, facts_seen: list[int] | None = None,
                      engine=consolidation_pass, checkpoints: list[float] | None = None
                      ) -> Callable[[str], float]:
    """Times one full pass; the checkpoint the node runs after it is timed on its own,
    into `checkpoints`."""
    def measure(url: str) -> float:
        partition = open_partition(url)  # opening (engine, schema check) is not the pass
        seconds, report = timed(lambda: engine(partition))
        assert report.events_read == expect_events, report.summary()
        if facts_seen is not None:
            facts_seen.append(report.facts_touched)
        checkpoint_s, _ = timed(partition.store.checkpoint_log)
        if checkpoints is not None:
            checkpoints.append(checkpoint_s)
        partition.store.close()
        return seconds
    return measure


def checkpoint_stats(samples_s: list[float]) -> dict:
    """The log checkpoint after the pass (the cold trial's dropped), in ms."""
    return {"checkpoint_after_median_ms": stats_ms(samples_s[1:])["median_ms"]}


def reference_loops(loops_ms: list[float]) -> dict:
    """The 10^6-addition loop (bench.stats.python_loop_ms) run untimed right before each
    trial's pass (the cold trial's dropped): how fast the machine ran Python at that
    moment. On a shared 2-core machine it swings nearly 2x between trials minutes apart,
    and a trial's pass with it."""
    return {"reference_loop_ms": loops_ms[1:]}


def full_pass(events: int, facts: int, trials: int, engine=consolidation_pass) -> dict:
    raw = cached_store(events, facts, consolidated=False)
    seen: list[int] = []
    checkpoints: list[float] = []
    samples = on_fresh_copies(raw, trials, lambda url: None,
                              full_pass_seconds(events, seen, engine, checkpoints))
    return {"events": events, "fact_rows": seen[-1], **stats_ms(samples),
            **checkpoint_stats(checkpoints)}


def previous_engine():
    """The per-event engine this pass replaced, kept as the tests' oracle."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "test"))
    from oracle_consolidation import consolidation_pass as per_event_pass
    return per_event_pass


def bare_group_by(events: int, facts: int, trials: int) -> dict:
    """The baseline: the four typed columns of the same rows in a plain table, grouped
    by SQLite alone (no Python beyond fetching the groups)."""
    raw = cached_store(events, facts, consolidated=False)
    with tempfile.TemporaryDirectory(prefix="bench_bare_") as scratch:
        path = Path(scratch) / "bare.db"
        with closing(sqlite3.connect(path)) as conn:
            conn.execute(f"ATTACH DATABASE '{raw}' AS src")
            conn.execute("CREATE TABLE results AS SELECT c.skill_id, c.target_class, "
                         "c.environment, c.success FROM src.result_facets f "
                         "JOIN src.result_combos c ON c.combo_id = f.combo_id ORDER BY f.seq")
            conn.commit()
            conn.execute("DETACH DATABASE src")
            rows = conn.execute("SELECT count(*) FROM results").fetchone()[0]
            assert rows == events, rows
            query = ("SELECT skill_id, target_class, environment, success, count(*) "
                     "FROM results GROUP BY skill_id, target_class, environment, success")
            samples = []
            for _ in range(trials + 1):
                seconds, groups = timed(lambda: conn.execute(query).fetchall())
                samples.append(seconds)
    return {"rows": events, "groups": len(groups), "query": query, **stats_ms(samples[1:])}


def warm_pass_seconds(store_events: int, new_events: int, keys: KeySpace,
                      touched: list[int], checkpoints: list[float], loops: list[float]
                      ) -> Callable[[str], float]:
    """Times an incremental pass as the node runs it in steady state: on a store it holds
    open and has already passed over (statements compiled, connection and combination
    cache warm), after the logger, through a connection of its own, appended new results.
    So: open, append new_events and pass (untimed), append new_events more, time a pass."""
    def measure(url: str) -> float:
        partition = open_partition(url)
        append_results(url, store_events, new_events, keys)
        consolidation_pass(partition)  # the pass before this one, untimed
        partition.store.checkpoint_log()
        append_results(url, store_events + new_events, new_events, keys)
        loops.append(python_loop_ms())
        seconds, report = timed(lambda: consolidation_pass(partition))
        assert report.events_read == new_events, report.summary()
        touched.append(report.facts_touched)
        checkpoints.append(timed(partition.store.checkpoint_log)[0])
        partition.store.close()
        return seconds
    return measure


def store_work_seconds(partition: Partition, config: RulesConfig = RulesConfig()
                       ) -> tuple[float, float]:
    """(read, write) seconds of what the next pass asks of the store, with the rules'
    computation taken out: the pass's reads (the aggregates of the new range, drained
    without folding them; the stored states and facts of the groups it touches) and its
    commit of results computed beforehand, untimed. No engine for these rules on this
    store, however fast its computation, can take less. The untimed computation reads
    first, so the timed reads find the statements compiled and the pages cached."""
    with collector_paused():
        inputs, report, result = plan_pass(partition, config)
        assert result is not None, "nothing new for the pass to do"
        groups: dict[str, list[str]] = {}
        for kind, key, _, _ in result.states:
            groups.setdefault(kind, []).append(key)
        started = time.perf_counter()
        with partition.store.read() as conn:
            aggregates = partition.result_aggregates(
                inputs.after_seq, inputs.until_seq, int(config.time_bucket_s * 1e9), conn)
            for _ in aggregates.outcomes:
                pass
            for _ in aggregates.values:
                pass
            for kind, keys in groups.items():
                partition.consolidation_states(kind, keys, conn)
            partition.facts_by_key({(c.kind, c.key) for c in result.changes}, conn)
        read_s = time.perf_counter() - started
        write_s, _ = timed(lambda: commit(partition, inputs, report, result))
    return read_s, write_s


def store_work_stats(samples: list[tuple[float, float]]) -> dict:
    """Medians (ms) of the store-work-only trials (the cold one already dropped)."""
    return {"read_median_ms": stats_ms([r for r, _ in samples])["median_ms"],
            "write_median_ms": stats_ms([w for _, w in samples])["median_ms"],
            **stats_ms([r + w for r, w in samples])}


def full_store_work(events: int, facts: int, trials: int) -> dict:
    """store_work_seconds of the full pass over a fresh copy of the unconsolidated store."""
    raw = cached_store(events, facts, consolidated=False)
    samples: list[tuple[float, float]] = []

    def measure(url: str) -> float:
        partition = open_partition(url)
        samples.append(store_work_seconds(partition))
        partition.store.close()
        return 0.0
    on_fresh_copies(raw, trials, lambda url: None, measure)
    return store_work_stats(samples[1:])


def incremental_store_work(store_events: int, new_events: int, facts: int, trials: int
                           ) -> dict:
    """store_work_seconds of the incremental pass, in warm_pass_seconds's steady state."""
    base = cached_store(store_events, facts)
    keys = KeySpace.for_facts(facts)
    samples: list[tuple[float, float]] = []

    def measure(url: str) -> float:
        partition = open_partition(url)
        append_results(url, store_events, new_events, keys)
        consolidation_pass(partition)
        partition.store.checkpoint_log()
        append_results(url, store_events + new_events, new_events, keys)
        samples.append(store_work_seconds(partition))
        partition.store.close()
        return 0.0
    on_fresh_copies(base, trials, lambda url: None, measure)
    return store_work_stats(samples[1:])


def incremental(store_events: int, new_events: int, facts: int, trials: int) -> dict:
    base = cached_store(store_events, facts)
    touched: list[int] = []
    checkpoints: list[float] = []
    loops: list[float] = []
    samples = on_fresh_copies(
        base, trials, lambda url: None,
        warm_pass_seconds(store_events, new_events, KeySpace.for_facts(facts), touched,
                          checkpoints, loops))
    return {"store_events": store_events, "new_events": new_events, "facts": facts,
            "facts_touched": touched[-1], **stats_ms(samples), **checkpoint_stats(checkpoints),
            **reference_loops(loops)}


def scaling_row(events: int, facts: int, trials: int) -> dict:
    """One row of the table, measured in a process of its own (clean RSS)."""
    raw = cached_store(events, facts, consolidated=False)  # built here, not in the child
    child = subprocess.run([sys.executable, "-m", "bench.consolidation_pass", "--scaling-child",
                            str(events), str(facts), str(trials), str(raw)],
                           capture_output=True, text=True, check=True)
    return json.loads(child.stdout.strip().splitlines()[-1])


def peak_rss_bytes() -> int:
    """VmHWM, the peak RSS of this process image (ru_maxrss would also count the
    parent's size at fork, before exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def scaling_child(events: int, facts: int, trials: int, raw: Path) -> None:
    process = psutil.Process()
    baseline = None
    samples, seen, checkpoints, loops = [], [], [], []
    for _ in range(trials + 1):
        with tempfile.TemporaryDirectory(prefix="bench_scale_") as scratch:
            url = working_copy(raw, Path(scratch))
            partition = open_partition(url)
            if baseline is None:  # imports done, store open, nothing consolidated yet
                baseline = process.memory_info().rss
            loops.append(python_loop_ms())
            seconds, report = timed(lambda: consolidation_pass(partition))
            assert report.events_read == events, report.summary()
            samples.append(seconds)
            seen.append(report.facts_touched)
            checkpoints.append(timed(partition.store.checkpoint_log)[0])
            # Let go of the report (10^4 changed facts) before the next trial's pass: what
            # a pass's caller keeps afterwards is not the pass's memory.
            del report
            partition.store.close()
    peak = peak_rss_bytes()
    print(json.dumps({"events": events, "fact_rows": seen[-1], **stats_ms(samples[1:]),
                      **checkpoint_stats(checkpoints), **reference_loops(loops),
                      "rss_baseline_mb": round(baseline / MB, 1),
                      "rss_peak_mb": round(peak / MB, 1)}))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full-events", type=int, default=100_000)
    parser.add_argument("--facts", type=int, default=KEY_SPACE_FACTS,
                        help="size of the key space, in facts one pass yields")
    parser.add_argument("--large-store", type=int, default=1_000_000,
                        help="the incremental pass's store and the scaling table's top size")
    parser.add_argument("--new-events", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=9,
                        help="timed trials (after one cold trial, discarded)")
    parser.add_argument("--scaling-child", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--out")
    return parser.parse_args()


def scaling_sizes(largest: int) -> list[int]:
    sizes, size = [], 100
    while size < largest:
        sizes.append(size)
        size *= 10
    return sizes + [largest]


def main() -> None:
    args = parse_args()
    if args.scaling_child:
        events, facts, trials, raw = args.scaling_child
        scaling_child(int(events), int(facts), int(trials), Path(raw))
        return
    started = time.perf_counter()
    seed_shaped = full_pass(args.full_events, SEED_SHAPED_FACTS, args.trials)
    per_event = full_pass(args.full_events, SEED_SHAPED_FACTS, min(args.trials, 2),
                          previous_engine())
    key_space = full_pass(args.full_events, args.facts, args.trials)
    bare = bare_group_by(args.full_events, args.facts, args.trials)
    key_work = full_store_work(args.full_events, args.facts, args.trials)
    scaling = [scaling_row(n, args.facts, args.trials) for n in scaling_sizes(args.large_store)]
    inc = incremental(args.large_store, args.new_events, args.facts, args.trials)
    inc_work = incremental_store_work(args.large_store, args.new_events, args.facts,
                                      args.trials)
    # The same on the seed-shaped stream (a robot with a few skills and targets): the pass
    # then touches a handful of facts, and its fixed costs are most of it.
    seed_large = full_pass(args.large_store, SEED_SHAPED_FACTS, args.trials)
    inc_seed = incremental(args.large_store, args.new_events, SEED_SHAPED_FACTS, args.trials)
    ratio_inc_seed = inc_seed["median_ms"] / seed_large["median_ms"]
    largest = scaling[-1]
    ratio_bare = key_space["median_ms"] / bare["median_ms"]
    ratio_inc = inc["median_ms"] / largest["median_ms"]
    result = {
        "full_pass_seed_shaped": {**seed_shaped, "goal_ms": FULL_PASS_GOAL_MS,
                                  "seed_paper_ms": SEED_PAPER_MS,
                                  "speedup_vs_seed": round(SEED_PAPER_MS
                                                           / seed_shaped["median_ms"], 2),
                                  "previous_engine": per_event,
                                  "speedup_vs_previous_engine": round(
                                      per_event["median_ms"] / seed_shaped["median_ms"], 2)},
        "full_pass_key_space": {**key_space, "bare_group_by": bare,
                                "over_bare_group_by": round(ratio_bare, 3),
                                "goal_ratio": KEY_SPACE_GOAL_RATIO,
                                "load_goal_ratio": KEY_SPACE_LOAD_GOAL_RATIO,
                                "store_work_only": {**key_work, "over_bare_group_by": round(
                                    key_work["median_ms"] / bare["median_ms"], 3)}},
        "incremental": {**inc, "full_pass_same_store_ms": largest["median_ms"],
                        "over_full_pass": round(ratio_inc, 4),
                        # the same ratio with each pass's log checkpoint counted in
                        "with_checkpoints_over_full_pass_with_checkpoint": round(
                            (inc["median_ms"] + inc["checkpoint_after_median_ms"])
                            / (largest["median_ms"] + largest["checkpoint_after_median_ms"]),
                            4),
                        "goal_ratio": INCREMENTAL_GOAL_RATIO, "goal_ms": INCREMENTAL_GOAL_MS,
                        "store_work_only": {**inc_work, "over_full_pass": round(
                            inc_work["median_ms"] / largest["median_ms"], 4)}},
        "incremental_seed_shaped": {**inc_seed, "full_pass_same_store": seed_large,
                                    "over_full_pass": round(ratio_inc_seed, 4),
                                    "goal_ratio": INCREMENTAL_GOAL_RATIO,
                                    "goal_ms": INCREMENTAL_GOAL_MS},
        "scaling": {"key_space_facts": args.facts, "trials": args.trials,
                    "cold_trial_discarded": True, "rows": scaling,
                    "seed_paper_rss_mb": list(SEED_PAPER_RSS_MB)},
        "goals": {
            "full_pass_seed_shaped_le_100ms": seed_shaped["median_ms"] <= FULL_PASS_GOAL_MS,
            "full_pass_key_space_le_bare_group_by": ratio_bare <= KEY_SPACE_GOAL_RATIO,
            "full_pass_key_space_le_3x_bare_group_by": ratio_bare <= KEY_SPACE_LOAD_GOAL_RATIO,
            "incremental_le_0.05x_full": ratio_inc <= INCREMENTAL_GOAL_RATIO,
            "incremental_lt_30ms": inc["median_ms"] < INCREMENTAL_GOAL_MS,
            # The goals above are on the 10^4-fact key space; these on the seed's shape.
            "incremental_seed_shaped_le_0.05x_full": ratio_inc_seed <= INCREMENTAL_GOAL_RATIO,
            "incremental_seed_shaped_lt_30ms": inc_seed["median_ms"] < INCREMENTAL_GOAL_MS,
            "rss_peak_le_120mb_at_largest": largest["rss_peak_mb"] <= MEMORY_GOAL_MB,
        },
        # Whether the store's own work for the pass (store_work_only: its reads and its
        # commit, no rule computation) leaves room for the goal at all: false means no
        # engine for these rules on this store can meet it.
        "goals_within_store_work": {
            "full_pass_key_space_le_bare_group_by":
                key_work["median_ms"] <= KEY_SPACE_GOAL_RATIO * bare["median_ms"],
            "full_pass_key_space_le_3x_bare_group_by":
                key_work["median_ms"] <= KEY_SPACE_LOAD_GOAL_RATIO * bare["median_ms"],
            "incremental_le_0.05x_full":
                inc_work["median_ms"] / largest["median_ms"] <= INCREMENTAL_GOAL_RATIO,
            "incremental_lt_30ms": inc_work["median_ms"] < INCREMENTAL_GOAL_MS,
        },
        "goals_measured_at": {"full_events": args.full_events,
                              "largest_store": args.large_store,
                              "goal_sizes": args.full_events == 100_000
                              and args.large_store == 1_000_000},
        "duration_s": round(time.perf_counter() - started, 1),
    }
    path = write_result("consolidation_pass", result, args.out)
    print_summary(result, path)


def print_summary(result: dict, path: Path) -> None:
    seed, key = result["full_pass_seed_shaped"], result["full_pass_key_space"]
    inc = result["incremental"]
    print(f"full pass, {seed['events']} events, seed-shaped ({seed['fact_rows']} facts): "
          f"{seed['median_ms']} ms median, p90 {seed['p90_ms']} (goal <= {FULL_PASS_GOAL_MS}); "
          f"{seed['speedup_vs_previous_engine']}x faster than the per-event engine "
          f"({seed['previous_engine']['median_ms']} ms)")
    print(f"full pass, {key['events']} events, {key['fact_rows']} facts: {key['median_ms']} ms"
          f" = {key['over_bare_group_by']}x a bare GROUP BY ({key['bare_group_by']['median_ms']}"
          " ms; goals <= 1x and <= 3x)")
    work = key["store_work_only"]
    print(f"  its store work alone (reads {work['read_median_ms']} ms, commit "
          f"{work['write_median_ms']} ms): {work['median_ms']} ms = "
          f"{work['over_bare_group_by']}x the bare GROUP BY")
    print(f"incremental, {inc['new_events']} new on {inc['store_events']}: {inc['median_ms']} ms"
          f" = {inc['over_full_pass']}x the full pass (goal <= {INCREMENTAL_GOAL_RATIO}x and "
          f"< {INCREMENTAL_GOAL_MS} ms); the log checkpoint after it "
          f"{inc['checkpoint_after_median_ms']} ms; reference loop "
          f"{min(inc['reference_loop_ms'])}-{max(inc['reference_loop_ms'])} ms")
    work = inc["store_work_only"]
    print(f"  its store work alone (reads {work['read_median_ms']} ms, commit "
          f"{work['write_median_ms']} ms): {work['median_ms']} ms")
    seed_inc = result["incremental_seed_shaped"]
    print(f"incremental, seed-shaped ({seed_inc['facts_touched']} facts touched): "
          f"{seed_inc['median_ms']} ms = {seed_inc['over_full_pass']}x its full pass "
          f"({seed_inc['full_pass_same_store']['median_ms']} ms)")
    print(f"{'events':>9} {'median ms':>10} {'p90 ms':>9} {'RSS base':>9} {'RSS peak':>9} "
          f"{'facts':>6} {'ckpt ms':>8}")
    for row in result["scaling"]["rows"]:
        print(f"{row['events']:>9} {row['median_ms']:>10} {row['p90_ms']:>9} "
              f"{row['rss_baseline_mb']:>9} {row['rss_peak_mb']:>9} {row['fact_rows']:>6} "
              f"{row['checkpoint_after_median_ms']:>8}")
    print("goals: " + ", ".join(f"{k}={'PASS' if v else 'FAIL'}"
                                for k, v in result["goals"].items()))
    print("within the store's own work: " + ", ".join(
        f"{k}={'yes' if v else 'NO'}" for k, v in result["goals_within_store_work"].items()))
    print(f"took {result['duration_s']} s; written to {path}")


if __name__ == "__main__":
    main()

"""Boot check time at 10^6 events, against the full re-hash of the same store.

On a scratch copy of a cached store: the first boot check (no checkpoint yet, so it
re-hashes every event: the baseline), then `--new` results are appended as a day of
work would, and the next boot check runs from the checkpoint. A boot check is what the
verifier runs: the chain's fast check, then the semantic tier held to the digest of the
newest consolidation run (every fact and state read and hashed; timed on its own too). Also times
`check_store(full=True)` (what `robot-memory verify --full` and the verifier's
background check do). Goals: the incremental boot check under 2 s at 10^6 events; the
first boot check (no checkpoint) and the full check at most 5 s each there.

    python -m bench.boot_check [--events N] [--new M] [--trials T] [--out FILE]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.stats import trials_ms, write_result
from bench.stores import IDENTITY, KeySpace, append_results, cached_store, working_copy
from robot_memory.store import MemoryStore, boot_check, check_store, check_tier

GOAL_S = 2.0
FIRST_AND_FULL_GOAL_S = 5.0


def timed(action) -> tuple[float, object]:
    started = time.perf_counter()
    value = action()
    return time.perf_counter() - started, value


def run(args: argparse.Namespace) -> dict:
    cached = cached_store(args.events, args.facts)
    with tempfile.TemporaryDirectory(prefix="bench_boot_") as scratch:
        url = working_copy(cached, Path(scratch))
        partition = MemoryStore(url).partition(IDENTITY)

        def boot() -> tuple[float, float, object, object]:
            chain_s, chain = timed(lambda: boot_check(partition))
            assert chain.ok, chain.describe()
            tier_s, tier = timed(lambda: check_tier(partition))
            assert tier.ok and tier.attested, tier.describe()
            return chain_s + tier_s, tier_s, chain, tier

        first_s, _, _, tier = boot()
        incremental, checked, tier_seconds = [], [], []
        appended = args.events
        for _ in range(args.trials):
            append_results(url, appended, args.new, KeySpace.for_facts(args.facts))
            appended += args.new
            seconds, tier_s, report, tier = boot()
            incremental.append(seconds)
            tier_seconds.append(tier_s)
            checked.append(report.events_checked)
        full_s, verdict = timed(lambda: check_store(url, IDENTITY, full=True))
        assert verdict.ok, verdict.lines
    boot = trials_ms(incremental)
    return {"events": args.events, "new_events_per_boot": args.new,
            "first_boot_check_no_checkpoint_ms": round(first_s * 1000, 1),
            "incremental_boot_check": boot, "events_rehashed_per_boot": checked,
            "semantic_tier_check": {"facts": tier.facts, "states": tier.states,
                                    **trials_ms(tier_seconds)},
            "full_check_ms": round(full_s * 1000, 1),
            "ratio_incremental_to_first": round(boot["median_ms"] / (first_s * 1000), 4),
            "goal_s": GOAL_S, "meets_goal": boot["median_ms"] / 1000 < GOAL_S,
            "goals": {"incremental_boot_check_lt_2_s": boot["median_ms"] / 1000 < GOAL_S,
                      "first_boot_check_le_5_s": first_s <= FIRST_AND_FULL_GOAL_S,
                      "full_check_le_5_s": full_s <= FIRST_AND_FULL_GOAL_S}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--new", type=int, default=10_000, help="results appended per boot")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args()
    result = run(args)
    path = write_result("boot_check", result, args.out)
    boot = result["incremental_boot_check"]
    print(f"{result['events']} events: first boot check (no checkpoint) "
          f"{result['first_boot_check_no_checkpoint_ms'] / 1000:.2f} s; incremental with "
          f"{args.new} new events {boot['median_ms'] / 1000:.3f} s (trials {boot['trials_ms']} "
          f"ms, of which the semantic tier {result['semantic_tier_check']['median_ms']} ms; "
          f"goal < {GOAL_S} s: {'PASS' if result['meets_goal'] else 'FAIL'}); full check "
          f"{result['full_check_ms'] / 1000:.1f} s")
    print(f"written to {path}")


if __name__ == "__main__":
    main()

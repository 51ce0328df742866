"""`make bench`: every benchmark, with fewer repetitions than their own defaults but on
the store sizes the goals name; results in bench/results/ (or --out-dir).

    python -m bench.run_all [--quick] [--out-dir bench/results]

--quick runs on small stores (a smoke test; its figures say nothing about the goals).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from bench.stats import RESULTS

MODEST = {"consolidation_pass": ["--trials", "3"],
          "grounding_latency": ["--requests", "1000", "--tails"],
          "boot_check": ["--trials", "2"],
          "report": ["--trials", "3"],
          "ingest": [],
          "sidecar_memory": [],
          "hostile_input": [],
          "lifetime": []}
QUICK = {"consolidation_pass": ["--trials", "1", "--large-store", "300000"],
         "grounding_latency": ["--events", "100000", "--requests", "300", "--lookups", "10000",
                               "--analogy-targets", "1000", "--analogy-lookups", "2000"],
         "boot_check": ["--events", "100000", "--trials", "1", "--new", "1000"],
         "report": ["--events", "10000", "--trials", "1"],
         "ingest": ["--seconds", "2", "--rates", "200,1000"],
         "sidecar_memory": ["--events", "20000", "--facts", "1000", "--duration", "6"],
         "hostile_input": ["--seconds", "20", "--baseline-seconds", "10"],
         "lifetime": ["--results", "40000", "--retain", "2000", "--every", "1000",
                      "--step", "2000", "--sample", "10000"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small stores: a smoke test")
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    args = parser.parse_args()
    failed = []
    for name, options in (QUICK if args.quick else MODEST).items():
        print(f"== bench.{name}", flush=True)
        command = [sys.executable, "-m", f"bench.{name}", *options,
                   "--out", str(args.out_dir / f"{name}.json")]
        if subprocess.run(command).returncode != 0:
            failed.append(name)
    if failed:
        print(f"failed to run: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""`make bench`: every benchmark at its default size; results in bench/results/."""

import subprocess
import sys

BENCHMARKS = ["bench.consolidation_pass", "bench.grounding_latency"]


def main() -> int:
    failed = 0
    for module in BENCHMARKS:
        print(f"== {module}", flush=True)
        failed += subprocess.run([sys.executable, "-m", module]).returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

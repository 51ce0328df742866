"""python -m robot_memory.sim [--decisions N] [--block B] [--seed S] [--out DIR]"""

import argparse
import sys

from robot_memory.sim.run_sim import DEFAULT_SEED, run_sim


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m robot_memory.sim", description=__doc__)
    parser.add_argument("--decisions", type=int, default=120)
    parser.add_argument("--block", type=int, default=20)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--period", type=float, default=1.0,
                        help="consolidation period, sim seconds")
    parser.add_argument("--out", default=".", help="directory for the JSON and the plot")
    args = parser.parse_args(argv)
    result = run_sim(args.decisions, args.block, args.seed, args.period, args.out)
    return 0 if result["effect"]["unproductive_with"] < result["effect"]["unproductive_without"] \
        else 1


if __name__ == "__main__":
    sys.exit(main())

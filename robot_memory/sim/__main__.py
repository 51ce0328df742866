"""python -m robot_memory.sim [--decisions N] [--block B] [--seed S] [--out DIR]
[--only closed_loop|transfer] [--learn N] [--held-out N] [--misleading N] [--held-out-block B]
[--joiner N]

Runs the closed loop (run_sim: sim_closed_loop.json/png), then the transfer experiments
(transfer: sim_transfer.json/png)."""

import argparse
import sys

from robot_memory.sim.run_sim import DEFAULT_SEED, run_sim


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m robot_memory.sim", description=__doc__)
    parser.add_argument("--decisions", type=int, default=120)
    parser.add_argument("--block", type=int, default=20)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--period", type=float, default=1.0,
                        help="consolidation period, sim seconds (closed loop; the transfer "
                        "experiments request a pass at each block's end)")
    parser.add_argument("--out", default=".", help="directory for the JSON and the plot")
    parser.add_argument("--only", choices=("closed_loop", "transfer"),
                        help="run one of the two parts (default: both)")
    parser.add_argument("--learn", type=int, default=40,
                        help="transfer: episodes of the closed loop's stream learned first")
    parser.add_argument("--held-out", type=int, default=12,
                        help="transfer: episodes of each held-out object that resembles one")
    parser.add_argument("--misleading", type=int, default=16,
                        help="transfer: episodes of the misleading held-out object")
    parser.add_argument("--joiner", type=int, default=24,
                        help="transfer: episodes of the second robot (fleet priors)")
    parser.add_argument("--held-out-block", type=int, default=4,
                        help="transfer: held-out episodes between consolidation passes")
    args = parser.parse_args(argv)
    ok = True
    if args.only != "transfer":
        result = run_sim(args.decisions, args.block, args.seed, args.period, args.out)
        ok = result["effect"]["unproductive_with"] < result["effect"]["unproductive_without"]
    if args.only != "closed_loop":
        from robot_memory.sim.transfer import run_transfer
        run_transfer(args.seed, args.learn, min(args.block, args.learn), args.held_out,
                     args.misleading, args.held_out_block, args.out,
                     joiner_episodes=args.joiner)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""`robot-memory`: the command line. Each verb is a thin adapter over the core; a
failure prints one line saying what and where, and exits with its family's code
(robot_memory.errors: the table is in `robot-memory --help`).

One module per group of verbs (intake, knowledge, integrity, running, evidence), the
parser in parser.py, what they share in common.py; `main` here."""

from __future__ import annotations

import sys

from robot_memory.cli.common import DEFAULT_DB, TRACEBACK_ENV, CommandError, Parser
from robot_memory.cli.parser import build_parser
from robot_memory.errors import RobotMemoryError, from_foreign
from robot_memory.operation.parameters import resolve_database_url


def main(argv: list[str] | None = None) -> int:
    """Run one verb; every failure is one line on stderr and its family's exit code."""
    import os
    prog, db = "robot-memory", ""
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "db", None):
            args.db = resolve_database_url(args.db)  # $ROS_HOME, as the nodes resolve it
        prog, db = f"robot-memory {args.verb}", getattr(args, "db", "")
        return args.func(args)
    except RobotMemoryError as exc:
        error = exc
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # foreign errors become ours at this boundary
        if os.environ.get(TRACEBACK_ENV) == "1":
            raise
        error = from_foreign(exc, f"--db {db}" if db else "")
        if error is None:
            print(f"{prog}: internal error: {type(exc).__name__}: "
                  f"{str(exc).splitlines()[0] if str(exc) else ''} "
                  f"(set {TRACEBACK_ENV}=1 for the traceback)", file=sys.stderr)
            return 1
    where = getattr(error, "prog", "")
    one_line = " | ".join(line.strip() for line in str(error).splitlines() if line.strip())
    print(f"{where or prog}: error: {one_line}", file=sys.stderr)
    return error.exit_code


__all__ = ["DEFAULT_DB", "CommandError", "Parser", "build_parser", "main"]

"""How every node process starts: `python -m robot_memory.ros.entry <module> --ros-args ...`
(robot-memory bringup) and the nodes/ executables (ros2 run, ros2 launch).

Importing rclpy, numpy, SQLAlchemy and pydantic takes seconds on a busy machine. A
SIGINT or SIGTERM in that time ends the process at once, with exit code 0 and no
traceback: nothing has been accepted or answered yet. Once the nodes run, spin.run_nodes
has its own handlers (stop, flush, close)."""

from __future__ import annotations

import importlib
import os
import signal
import sys

from robot_memory.operation.middleware import use_fastdds_profiles

MODULES = ("manifest_verifier", "episodic_logger", "consolidator", "grounding_server",
           "all_nodes")


def _exit_while_starting(_signum, _frame) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)  # a second one must not interrupt the exit
    # os._exit, not sys.exit: a SystemExit raised while a C extension (rclpy's) is being
    # initialised turns into an ImportError with a traceback and exit code 1. Nothing has
    # been accepted or answered yet, so there is nothing to flush but our own output.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run(module: str) -> None:
    if module not in MODULES:
        raise SystemExit(f"robot_memory: unknown node module '{module}' (one of {MODULES})")
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _exit_while_starting)
    use_fastdds_profiles()  # before rclpy starts the middleware
    importlib.import_module(f"robot_memory.ros.{module}").main()


if __name__ == "__main__":
    run(sys.argv[1] if len(sys.argv) > 1 else "")

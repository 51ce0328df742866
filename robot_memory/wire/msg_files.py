"""Where robot_memory's .msg definitions are, for readers that decode without rclpy."""

from __future__ import annotations

import os
from pathlib import Path


def our_msg_dir() -> Path | None:
    """robot_memory's msg/ directory: the source tree's, or an installed package's."""
    here = Path(__file__).resolve().parents[2] / "msg"
    if (here / "ExecutionResult.msg").exists():
        return here
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        candidate = Path(prefix) / "share" / "robot_memory" / "msg"
        if prefix and (candidate / "ExecutionResult.msg").exists():
            return candidate
    return None

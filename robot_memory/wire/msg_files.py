"""Where .msg definitions are (robot_memory's and the standard ones its messages nest),
and their fields as the codecs of wire/ declare them, for readers without rclpy."""

from __future__ import annotations

import os
import re
from pathlib import Path

PRIMITIVES = frozenset({"bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16",
                        "uint16", "int32", "uint32", "int64", "uint64", "string", "wstring"})
_ARRAY = re.compile(r"\[(<=)?\d*\]$")  # T[], T[N], T[<=N]
_BOUNDED_STRING = re.compile(r"^(w?string)<=\d+$")


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


def msg_file(type_name: str) -> Path | None:
    """The .msg file of `package/Type`: robot_memory's from our_msg_dir, another
    package's from share/<package>/msg/ under AMENT_PREFIX_PATH (a sourced ROS install,
    or scripts/env.sh's virtual environment)."""
    package, _, name = type_name.partition("/")
    if package == "robot_memory":
        folder = our_msg_dir()
        return folder / f"{name}.msg" if folder and (folder / f"{name}.msg").exists() else None
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        candidate = Path(prefix) / "share" / package / "msg" / f"{name}.msg"
        if prefix and candidate.exists():
            return candidate
    return None


def msg_fields(text: str, package: str) -> tuple[tuple[str, str], ...]:
    """(name, type) of each field of a .msg definition, in order; comments and constants
    left out. Types as wire/cdr.Layout writes them: as the file writes them (a bound or
    an array's size kept: each changes the bytes or what is valid), a message type as
    `package/Type` (a type of the same package named with it, `Header` as
    std_msgs/Header)."""
    fields = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        type_, rest = line.split(None, 1)
        name = rest.split(None, 1)[0]
        if "=" in rest and len(rest.split("=", 1)[0].split()) == 1:  # NAME=value: a constant
            continue
        array = _ARRAY.search(type_)
        suffix = array.group(0) if array else ""
        base = type_[:len(type_) - len(suffix)]
        if base == "Header":
            base = "std_msgs/Header"
        elif base not in PRIMITIVES and not _BOUNDED_STRING.match(base):
            base = base.replace("/msg/", "/") if "/" in base else f"{package}/{base}"
        fields.append((name, base + suffix))
    return tuple(fields)

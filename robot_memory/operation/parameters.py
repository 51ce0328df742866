"""The parameter table (parameters.yaml), read without ROS.

Nodes declare from it, the launch file and `robot-memory bringup` take defaults and
node names from it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from robot_memory.errors import UnknownParameter, UsageError

SPEC_PATH = Path(__file__).with_name("parameters.yaml")
_PY_TYPES = {"string": str, "bool": bool, "int": int, "double": float, "string_array": list}


class InvalidParameterValue(UsageError, ValueError):
    """Raised by `node_settings` when a value is of the wrong type or out of its range
    (a ValueError too, as it always was)."""

    default_reason = "invalid_parameter"


@dataclass(frozen=True)
class ParameterSpec:
    """One parameter of parameters.yaml: type, default, description, range, read-only."""

    name: str
    type: str
    default: Any
    description: str
    read_only: bool = True
    min: float | None = None
    max: float | None = None

    def check(self, value: Any) -> str | None:
        """Why `value` is not acceptable, or None."""
        expected = _PY_TYPES[self.type]
        if self.type == "double" and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            return f"{self.name} must be {self.type}, got {type(value).__name__}"
        if self.type == "string_array" and not all(isinstance(v, str) for v in value):
            return f"{self.name} must be a list of strings"
        if self.min is not None and value < self.min:
            return f"{self.name}={value} is below its minimum {self.min}"
        if self.max is not None and value > self.max:
            return f"{self.name}={value} is above its maximum {self.max}"
        return None


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return yaml.safe_load(SPEC_PATH.read_text(encoding="utf-8"))


ROS_HOME_VARIABLE = "$ROS_HOME"


def ros_home() -> Path:
    """Where ROS tools keep their files: $ROS_HOME, or ~/.ros when it is unset."""
    return Path(os.environ.get("ROS_HOME") or Path.home() / ".ros").expanduser()


def resolve_database_url(url: str) -> str:
    """`url` with $ROS_HOME replaced by the ROS home directory; for a SQLite file there,
    its folder is created. Any other URL is returned as it is."""
    if ROS_HOME_VARIABLE not in url:
        return url
    resolved = url.replace(ROS_HOME_VARIABLE, str(ros_home()))
    if resolved.startswith("sqlite:///"):
        Path(resolved.removeprefix("sqlite:///").split("?", 1)[0]).parent.mkdir(
            parents=True, exist_ok=True)
    return resolved


def node_names() -> list[str]:
    """The four nodes, in start order."""
    return list(_table()["nodes"])


def node_parameters(node: str) -> dict[str, ParameterSpec]:
    """Every parameter `node` declares (the common ones included). KeyError for an
    unknown node name."""
    table = _table()
    if node not in table["nodes"]:
        raise KeyError(f"unknown node {node!r}; known: {table['nodes']}")
    entries = {**table["common"], **table.get(node, {})}
    return {name: ParameterSpec(name=name, **spec) for name, spec in entries.items()}


def node_defaults(node: str) -> dict[str, Any]:
    """Name -> default of every parameter `node` declares."""
    return {name: spec.default for name, spec in node_parameters(node).items()}


def node_settings(node: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """Defaults of `node` updated with the overrides it declares; unknown names ignored
    (so one shared override dict can feed every node; `check_names` refuses them).
    Raises InvalidParameterValue (a UsageError and a ValueError) for a value of the
    wrong type or out of range."""
    specs = node_parameters(node)
    values = node_defaults(node)
    for name, value in overrides.items():
        if name in specs:
            problem = specs[name].check(value)
            if problem:
                raise InvalidParameterValue(f"{node}: {problem}")
            values[name] = value
    return values


def check_names(overrides: dict[str, Any], nodes: tuple[str, ...] | list[str]) -> None:
    """Raise UnknownParameter when a name in `overrides` is declared by none of `nodes`
    (a mistyped name would otherwise be ignored by `node_settings`)."""
    known = set()
    for node in nodes:
        known.update(node_parameters(node))
    unknown = sorted(set(overrides) - known)
    if unknown:
        where = nodes[0] if len(nodes) == 1 else "any node"
        raise UnknownParameter("--param", "unknown_parameter",
                               f"{', '.join(unknown)}: not a parameter of {where} "
                               f"(see docs/parameters.md)")


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list):
        return f"`[{', '.join(str(v) for v in value)}]`"
    if isinstance(value, str):
        return f"`{value}`" if value else '`""`'
    return f"`{value}`"


def _range(spec: ParameterSpec) -> str:
    if spec.min is None and spec.max is None:
        return ""
    return f"{'' if spec.min is None else spec.min} .. {'' if spec.max is None else spec.max}"


def markdown() -> str:
    """docs/parameters.md: every parameter of every node, rendered from parameters.yaml."""
    table = _table()
    lines = ["# Parameters", "",
             "<!-- Generated from robot_memory/operation/parameters.yaml by "
             "`python -m robot_memory.operation.parameters --markdown docs/parameters.md`; "
             "do not edit by hand. -->", "",
             "Every node parameter, declared once in "
             "[`robot_memory/operation/parameters.yaml`]"
             "(../robot_memory/operation/parameters.yaml) and read by the nodes, the launch file "
             "and `robot-memory bringup`. Set them with "
             "`robot-memory bringup --param NAME=VALUE`, a launch `params_file` "
             "(see the README) or `--ros-args -p NAME:=VALUE` for a single node. "
             "`use_sim_time` is ROS's own parameter; the launch file and `bringup` set it "
             "on every node.", ""]
    sections = [("Every node", "common", table["common"])]
    sections += [(f"`{node}`", node, table.get(node, {})) for node in table["nodes"]]
    for title, key, entries in sections:
        lines += [f"## {title}", ""]
        if key != "common":
            lines += ["Also declares every parameter of \"Every node\" above.", ""]
        lines += ["| parameter | type | default | range | read-only | meaning |",
                  "|---|---|---|---|---|---|"]
        for name, raw in entries.items():
            spec = ParameterSpec(name=name, **raw)
            lines.append(f"| `{name}` | {spec.type} | {_cell(spec.default)} | {_range(spec)} "
                         f"| {'yes' if spec.read_only else 'no'} | "
                         f"{spec.description.replace('|', '&#124;')} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`python -m robot_memory.operation.parameters --markdown [PATH]`: regenerate the docs."""
    import argparse
    parser = argparse.ArgumentParser(prog="python -m robot_memory.operation.parameters",
                                     description="Render the parameter table.")
    parser.add_argument("--markdown", metavar="PATH", nargs="?", const="-", required=True,
                        help="write docs/parameters.md's content to PATH (default stdout)")
    args = parser.parse_args(argv)
    text = markdown()
    if args.markdown == "-":
        print(text, end="")
    else:
        Path(args.markdown).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

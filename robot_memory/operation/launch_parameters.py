"""What the launch file passes each node as parameters, and in what order, so that the
launch arguments typed on the command line win over a `params_file`. ROS-free, so the
rule is tested without launch_ros (test/core/test_launch_parameters.py), and proved
with real node processes started with exactly these sources
(test/ros/test_launch_parameter_order.py).

How rcl merges parameter sources (the `--params-file` files and `-p` rules of a
process): every source is a set of sections keyed by a node-name pattern (`/consolidator`,
`/**/consolidator`, `/**`, ...). The sections apply in the order their keys FIRST appear
across the sources; within one key, a later source overwrites an earlier one. So a file
passed last does not win by itself: launch_ros writes the defaults and arguments under
the node's full name (`/consolidator`), seen first, and a user's `/**/consolidator` or
`/**` section, first seen in the params_file, applies after it.

The rule here: the arguments go in a last file that repeats them under EVERY section
key the params_file has (its nesting kept), and under `/**`. Every section that could set
an argument then ends with the argument's value, whatever order the sections apply in.
A section of the params_file for another node gets the arguments too; a node ignores
parameters it does not declare.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from robot_memory.errors import InputError
from robot_memory.operation.parameters import node_defaults, node_names, node_parameters

# Launch arguments that set the node parameter of the same name.
STRING_ARGUMENTS = ("manifest_path", "certified_hash", "certified_hash_file", "database_url",
                    "operator_keys_file")
ARGUMENTS = (*STRING_ARGUMENTS, "use_sim_time")
PARAMETERS_KEY = "ros__parameters"
EVERY_NODE = "/**"


class ParamsFileError(InputError):
    """Raised when a params_file is not a ROS 2 parameters file (says which and why)."""


@dataclass(frozen=True)
class Overruled:
    """A value of the params_file that a launch argument replaces."""

    section: str  # the section's key path, e.g. "/**/consolidator"
    name: str
    file_value: Any
    argument_value: Any

    def describe(self) -> str:
        return (f"params_file sets {self.name}={self.file_value!r} in '{self.section}'; "
                f"the launch argument {self.name}:={self.argument_value!r} wins")


def argument_values(typed: dict[str, str]) -> dict[str, Any]:
    """The launch arguments as parameter values: strings stay strings (a hash made only
    of digits is not a number), use_sim_time is a bool."""
    values: dict[str, Any] = {name: str(typed[name]) for name in STRING_ARGUMENTS
                              if name in typed}
    if "use_sim_time" in typed:
        text = str(typed["use_sim_time"]).strip().lower()
        if text not in ("true", "false"):
            raise ValueError(f"use_sim_time: {typed['use_sim_time']!r} is not true or false")
        values["use_sim_time"] = text == "true"
    return values


def node_arguments(node: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments `node` declares (use_sim_time is every node's)."""
    declared = node_parameters(node)
    return {name: value for name, value in arguments.items()
            if name in declared or name == "use_sim_time"}


def table_defaults(node: str) -> dict[str, Any]:
    """The node's parameter defaults that are not launch arguments (rcl's YAML parser
    refuses empty sequences, and an absent list is the default anyway)."""
    return {name: value for name, value in node_defaults(node).items()
            if value != [] and name not in ARGUMENTS}


def load_params_file(path: str) -> dict[str, Any]:
    """The params_file as a document (an empty file: no sections)."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
    except OSError as exc:
        raise ParamsFileError(f"params_file {path}: cannot be read: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ParamsFileError(f"params_file {path}: not YAML: {exc}") from exc
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ParamsFileError(f"params_file {path}: not a ROS 2 parameters file (a mapping "
                              f"of node names to ros__parameters)")
    return document


def section_paths(document: dict[str, Any]) -> list[tuple[str, ...]]:
    """The key path of every section (`a: {b: {ros__parameters: ...}}` is ("a", "b")),
    in the document's order."""
    paths = []

    def walk(node: dict[str, Any], path: tuple[str, ...]) -> None:
        for key, value in node.items():
            if key == PARAMETERS_KEY:
                paths.append(path)
            elif isinstance(value, dict):
                walk(value, (*path, str(key)))

    walk(document, ())
    return [path for path in paths if path]


def arguments_document(params_document: dict[str, Any], arguments: dict[str, Any]
                       ) -> dict[str, Any]:
    """The last parameters file: `arguments` under every section key of the params_file
    (nesting kept) and under `/**`."""
    document: dict[str, Any] = {}
    for path in [*section_paths(params_document), (EVERY_NODE,)]:
        node = document
        for part in path:
            node = node.setdefault(part, {})
        node[PARAMETERS_KEY] = dict(arguments)
    return document


def overruled(params_document: dict[str, Any], arguments: dict[str, Any]) -> list[Overruled]:
    """The params_file's values of the launch arguments that differ from them."""
    found = []
    for path in section_paths(params_document):
        node = params_document
        for part in path:
            node = node[part]
        values = node.get(PARAMETERS_KEY) or {}
        if not isinstance(values, dict):
            continue
        for name, value in values.items():
            if name in arguments and value != arguments[name]:
                found.append(Overruled("/".join(path).replace("//", "/"), name, value,
                                       arguments[name]))
    return found


def one_process_defaults() -> dict[str, Any]:
    """The table defaults of the four nodes in one process: a `/**/<node>` section each."""
    document: dict[str, Any] = {}
    for node in node_names():
        document.update(node_defaults_document(node))
    return document


def node_defaults_document(node: str) -> dict[str, Any]:
    """The table defaults of one node: a `/**/<node>` section. Written by the launch file
    itself (launch_ros would leave a file of its own behind for a dict), first, so any
    section of the params_file applies after it."""
    return {f"{EVERY_NODE}/{node}": {PARAMETERS_KEY: table_defaults(node)}}


@dataclass(frozen=True)
class ParameterSources:
    """What one node process is given, in this order: the table defaults, the user's
    params_file, the arguments file (the first and last: parameters documents)."""

    defaults: dict[str, Any]
    params_file: str
    arguments: dict[str, Any]


def parameter_sources(node: str | None, params_file: str, typed: dict[str, str]
                      ) -> ParameterSources:
    """The sources of `node`'s process (None: the one process of all four nodes), from
    the params_file's path and the launch arguments as typed (strings)."""
    arguments = argument_values(typed)
    document = load_params_file(params_file)
    if node is None:
        return ParameterSources(one_process_defaults(), params_file,
                                arguments_document(document, arguments))
    return ParameterSources(node_defaults_document(node), params_file,
                            arguments_document(document, node_arguments(node, arguments)))

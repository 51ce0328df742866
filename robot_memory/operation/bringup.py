"""`robot-memory bringup`: start the four nodes as processes (or, with --one-process, all
four in one process), with the parameters the launch file would give them (both read
parameters.yaml), where `ros2 launch` is absent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import yaml

from robot_memory.operation.parameters import node_names, node_settings, resolve_database_url


def params_document(overrides: dict[str, Any], use_sim_time: bool) -> dict[str, Any]:
    """A ROS 2 --params-file document: one section per node, matched in any namespace."""
    document = {}
    for node in node_names():
        values = node_settings(node, overrides)
        # rcl's YAML parser rejects empty sequences; an absent list means "default" anyway.
        # Each node gets its own copy of a list: one list shared by two nodes (an override
        # both declare, operator_keys) would be dumped as a YAML alias, which rcl refuses.
        values = {k: list(v) if isinstance(v, list) else v for k, v in values.items()
                  if v != []}
        if "database_url" in values:  # the nodes see the real path ($ROS_HOME resolved)
            values["database_url"] = resolve_database_url(values["database_url"])
        values["use_sim_time"] = use_sim_time
        document[f"/**/{node}"] = {"ros__parameters": values}
    return document


ONE_PROCESS = "robot_memory_all"  # the process name in one-process mode (all_nodes module)


def node_command(node: str, params_file: str, namespace: str = "",
                 log_level: str = "info") -> list[str]:
    module = "all_nodes" if node == ONE_PROCESS else node
    command = [sys.executable, "-m", "robot_memory.ros.entry", module, "--ros-args",
               "--params-file", params_file, "--log-level", log_level]
    if namespace:
        command += ["-r", f"__ns:=/{namespace.strip('/')}"]
    return command


@dataclass
class Stack:
    """The running node processes; stop() ends only these, by their own PIDs.

    With one_process, `processes` holds a single entry, ONE_PROCESS, running all of
    `nodes`; process_of(node) and respawn(node) then mean that one process. With
    own_process_group, the processes share a process group of their own (`pgid`), so
    os.killpg(stack.pgid, SIGINT) reaches all of them as a terminal's Ctrl-C does."""

    overrides: dict[str, Any]
    use_sim_time: bool = False
    namespace: str = ""
    log_level: str = "info"
    nodes: list[str] = field(default_factory=node_names)
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    one_process: bool = False
    own_process_group: bool = False
    pgid: int | None = None

    def start(self, stdout=None, stderr=None) -> "Stack":
        handle = tempfile.NamedTemporaryFile("w", suffix="_robot_memory_params.yaml",
                                             delete=False)
        with handle:
            yaml.safe_dump(params_document(self.overrides, self.use_sim_time), handle)
        self.params_file = handle.name
        if self.one_process:
            if sorted(self.nodes) != sorted(node_names()):
                raise ValueError("one_process runs all four nodes; `nodes` cannot pick some")
            self.respawn(ONE_PROCESS, stdout, stderr)
        else:
            for node in self.nodes:
                self.respawn(node, stdout, stderr)
        return self

    def process_of(self, node: str) -> subprocess.Popen:
        """The process that runs `node`."""
        return self.processes[ONE_PROCESS if self.one_process else node]

    def respawn(self, node: str, stdout=None, stderr=None) -> subprocess.Popen:
        """(Re)start the process of one node with the same parameters, like launch's
        respawn=True (in one-process mode: all four nodes); the verifier brings the
        nodes back to active."""
        name = ONE_PROCESS if self.one_process else node
        self.processes[name] = subprocess.Popen(
            node_command(name, self.params_file, self.namespace, self.log_level),
            stdout=stdout, stderr=stderr, env=os.environ.copy(),
            process_group=(self.pgid or 0) if self.own_process_group else None)
        if self.own_process_group and self.pgid is None:
            self.pgid = self.processes[name].pid
        return self.processes[name]

    def exited(self) -> dict[str, int]:
        return {name: p.returncode for name, p in self.processes.items() if p.poll() is not None}

    def stop(self, timeout: float = 10.0) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + timeout
        for process in self.processes.values():
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if getattr(self, "params_file", None) and os.path.exists(self.params_file):
            os.unlink(self.params_file)


def run_bringup(overrides: dict[str, Any], use_sim_time: bool, namespace: str,
                log_level: str, one_process: bool = False) -> int:
    """Run until Ctrl-C / SIGTERM, or until a node exits (then stop the rest, like a
    launch file whose nodes are all required)."""
    stack = Stack(overrides, use_sim_time, namespace, log_level,
                  one_process=one_process).start()
    stopping = False

    def request_stop(_signum, _frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    print(f"robot_memory: started {', '.join(stack.nodes)}"
          f"{' in one process' if one_process else ''} "
          f"(namespace '/{namespace.strip('/')}', use_sim_time={use_sim_time})", flush=True)
    try:
        while not stopping:
            exited = stack.exited()
            if exited:
                print(f"robot_memory: node(s) exited {exited}; stopping the others",
                      file=sys.stderr, flush=True)
                return 1
            time.sleep(0.2)
        return 0
    finally:
        stack.stop()

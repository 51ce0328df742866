"""`robot-memory bringup`: start the four nodes as processes, with the parameters the
launch file would give them (both read parameters.yaml), where `ros2 launch` is absent."""

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

from robot_memory.parameters import node_names, node_settings


def params_document(overrides: dict[str, Any], use_sim_time: bool) -> dict[str, Any]:
    """A ROS 2 --params-file document: one section per node, matched in any namespace."""
    document = {}
    for node in node_names():
        values = node_settings(node, overrides)
        # rcl's YAML parser rejects empty sequences; an absent list means "default" anyway.
        values = {k: v for k, v in values.items() if v != []}
        values["use_sim_time"] = use_sim_time
        document[f"/**/{node}"] = {"ros__parameters": values}
    return document


def node_command(node: str, params_file: str, namespace: str = "",
                 log_level: str = "info") -> list[str]:
    command = [sys.executable, "-m", f"robot_memory.ros.{node}", "--ros-args",
               "--params-file", params_file, "--log-level", log_level]
    if namespace:
        command += ["-r", f"__ns:=/{namespace.strip('/')}"]
    return command


@dataclass
class Stack:
    """The running node processes; stop() ends only these, by their own PIDs."""

    overrides: dict[str, Any]
    use_sim_time: bool = False
    namespace: str = ""
    log_level: str = "info"
    nodes: list[str] = field(default_factory=node_names)
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    def start(self, stdout=None, stderr=None) -> "Stack":
        handle = tempfile.NamedTemporaryFile("w", suffix="_robot_memory_params.yaml",
                                             delete=False)
        with handle:
            yaml.safe_dump(params_document(self.overrides, self.use_sim_time), handle)
        self.params_file = handle.name
        for node in self.nodes:
            self.respawn(node, stdout, stderr)
        return self

    def respawn(self, node: str, stdout=None, stderr=None) -> subprocess.Popen:
        """(Re)start one node with the same parameters, like launch's respawn=True; the
        verifier brings it back to active."""
        self.processes[node] = subprocess.Popen(
            node_command(node, self.params_file, self.namespace, self.log_level),
            stdout=stdout, stderr=stderr, env=os.environ.copy())
        return self.processes[node]

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
                log_level: str) -> int:
    """Run until Ctrl-C / SIGTERM, or until a node exits (then stop the rest, like a
    launch file whose nodes are all required)."""
    stack = Stack(overrides, use_sim_time, namespace, log_level).start()
    stopping = False

    def request_stop(_signum, _frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    print(f"robot_memory: started {', '.join(stack.nodes)} "
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

"""The one way our node processes run: init, spin until Ctrl-C / SIGTERM / shutdown, then
let each node finish its work (flush) before the context goes.

One shutdown path, whether a process runs one node or all four. A terminal's Ctrl-C
reaches every process of its group, and `ros2 launch` then sends its own SIGINT (later
SIGTERM): so the first SIGINT or SIGTERM only asks to stop, and any further one is
absorbed. rclpy's own handlers are off, because they raise KeyboardInterrupt wherever
the main thread happens to be, including inside the flush. The main thread only waits;
each node's executor spins in a thread of its own. Stopping is then, in order: stop
every executor (no callback runs or starts any more), flush each node in the order
given (the grounding server's consultation audit, then the logger's pending results),
close the stores, destroy the nodes, shut the context down. The exit code is 0.
"""

from __future__ import annotations

import signal
import sys
import threading
from dataclasses import dataclass
from typing import Callable

import rclpy
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
JOIN_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class NodeSpec:
    """How one node runs: made after rclpy.init, spun by its own executor, and flushed
    (before_destroy) once every executor of the process has stopped."""

    make_node: Callable[[], Node]
    make_executor: Callable[[], Executor] = SingleThreadedExecutor
    before_destroy: Callable[[Node], None] | None = None
    configure_process: Callable[[], None] | None = None  # process-wide settings it needs


class _StopRequest:
    """Set by the first SIGINT/SIGTERM, an external context shutdown or a failed spin;
    every later signal is absorbed."""

    def __init__(self):
        self.event = threading.Event()
        self.error: BaseException | None = None

    def on_signal(self, _signum, _frame) -> None:
        self.event.set()

    def fail(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        self.event.set()


def run_node(make_node: Callable[[], Node] | NodeSpec, args=None,
             make_executor: Callable[[], Executor] = SingleThreadedExecutor,
             before_destroy: Callable[[Node], None] | None = None) -> None:
    """Run one node as the whole process (`python -m robot_memory.ros.<node>`)."""
    spec = make_node if isinstance(make_node, NodeSpec) else \
        NodeSpec(make_node, make_executor, before_destroy)
    run_nodes([spec], args)


def run_nodes(specs: list[NodeSpec], args=None) -> None:
    """Run the nodes of `specs` in this process until asked to stop; flush in list order.
    A callback that raised ends the process the same way, then re-raises (exit code 1)."""
    for spec in specs:
        if spec.configure_process is not None:
            spec.configure_process()
    stop = _StopRequest()
    previous = {sig: signal.signal(sig, stop.on_signal) for sig in STOP_SIGNALS}
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    nodes: list[tuple[NodeSpec, Node]] = []
    running: list[tuple[Executor, threading.Thread]] = []
    try:
        for spec in specs:
            node = spec.make_node()
            nodes.append((spec, node))
            executor = spec.make_executor()  # after init: an executor needs a live context
            executor.add_node(node)
            thread = threading.Thread(target=_spin, args=(executor, stop),
                                      name=f"spin_{node.get_name()}")
            thread.start()
            running.append((executor, thread))
        stop.event.wait()
    finally:
        # Absorb every later signal (launch's, a repeated Ctrl-C) until the process ends.
        for sig in STOP_SIGNALS:
            signal.signal(sig, lambda _signum, _frame: None)
        _shut_down(nodes, running)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stop.error is not None:
        raise stop.error


def _spin(executor: Executor, stop: _StopRequest) -> None:
    try:
        executor.spin()
    except ExternalShutdownException:  # the context went first: stop the process too
        pass
    except BaseException as exc:  # a callback raised: stop everything, report it once
        stop.fail(exc)
        return
    stop.event.set()


def _shut_down(nodes: list[tuple[NodeSpec, Node]],
               running: list[tuple[Executor, threading.Thread]]) -> None:
    for executor, _thread in running:
        executor.shutdown()
    for _executor, thread in running:
        thread.join(JOIN_TIMEOUT_S)  # the callback in progress, if any, finishes first
    for spec, node in nodes:
        if spec.before_destroy is not None:
            _report_failure(f"flushing {node.get_name()}", spec.before_destroy, node)
    for _spec, node in nodes:
        partition = getattr(node, "partition", None)
        if partition is not None:
            _report_failure(f"closing the store of {node.get_name()}", partition.store.close)
    for _spec, node in nodes:
        node.destroy_node()
    rclpy.try_shutdown()


def _report_failure(what: str, action: Callable, *args) -> None:
    """One node's failing flush must not keep the others from flushing."""
    try:
        action(*args)
    except Exception as exc:
        print(f"robot_memory: {what} failed: {exc}", file=sys.stderr, flush=True)

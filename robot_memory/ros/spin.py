"""The one way our node processes run: init, spin until Ctrl-C / SIGTERM / shutdown, then
let each node finish its work (flush) before the context goes.

One shutdown path, whether a process runs one node or all four. A terminal's Ctrl-C
reaches every process of its group, and `ros2 launch` then sends its own SIGINT (later
SIGTERM): so the first SIGINT or SIGTERM only asks to stop, and any further one is
absorbed. rclpy's own handlers are off, because they raise KeyboardInterrupt wherever
the main thread happens to be, including inside the flush. The main thread only waits;
each node's executor spins in a thread of its own. Stopping is then, node by node in
the order given: stop its executor (nothing more is answered or accepted) and flush it
(the grounding server's consultation audit, then the logger's pending results); then
close the stores, destroy the nodes, shut the context down. The exit code is 0.
"""

from __future__ import annotations

import gc
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Callable

import rclpy
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from robot_memory.ros.rclpy_internals import destroy_lifecycle_node

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
JOIN_TIMEOUT_S = 10.0
SIGNAL_POLL_S = 0.1  # how soon the main thread sees a stop signal


@dataclass(frozen=True)
class NodeSpec:
    """How one node runs: made after rclpy.init, spun by its own executor, and flushed
    (before_destroy) once every executor of the process has stopped."""

    make_node: Callable[[], Node]
    # A SingleThreadedExecutor or a subclass (ros/side_executor.MainExecutor): _Spinner
    # waits for the callbacks by joining the thread that spins it.
    make_executor: Callable[[], Executor] = SingleThreadedExecutor
    before_destroy: Callable[[Node], None] | None = None
    configure_process: Callable[[], None] | None = None  # process-wide settings it needs


class _StopRequest:
    """Set by the first SIGINT/SIGTERM, an external context shutdown or a failed spin;
    every later signal is absorbed."""

    def __init__(self):
        self.event = threading.Event()
        self.error: BaseException | None = None
        self.signalled = False

    def on_signal(self, _signum, _frame) -> None:
        # Only a flag: the handler runs in the main thread between two of its bytecodes,
        # possibly inside Event.wait while it holds the Event's lock (a second signal
        # landing as the first one wakes it). event.set() here would wait for that lock
        # forever. The main thread sets the event when it sees the flag.
        self.signalled = True

    def wait(self) -> None:
        """Until a signal, a failed spin or an external shutdown asks to stop."""
        while not self.signalled and not self.event.wait(SIGNAL_POLL_S):
            pass
        self.event.set()

    def fail(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        self.event.set()


_running: list[_StopRequest] = []  # the stop request of run_nodes, while it runs


def stop_process() -> bool:
    """Ask this process to stop as after a Ctrl-C (stop, flush, close, leave the graph,
    exit code 0), from any thread or callback. False outside run_nodes."""
    if not _running:
        return False
    _running[-1].signalled = True  # read by the main thread within SIGNAL_POLL_S
    return True


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
    _running.append(stop)
    for sig in STOP_SIGNALS:
        signal.signal(sig, stop.on_signal)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    nodes: list[tuple[NodeSpec, Node]] = []
    spinners: list[_Spinner] = []
    try:
        for spec in specs:
            node = spec.make_node()
            nodes.append((spec, node))
            spinners.append(_Spinner(node, spec.make_executor(), stop))
        settle_heap()
        stop.wait()
    finally:
        # Ignore every later signal (launch's, a repeated Ctrl-C) until the process has
        # ended. SIG_IGN, not a Python handler: the interpreter resets its own handlers to
        # the default while it finalizes, and a signal landing then would kill it with -2.
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        stop.event.set()
        _shut_down(nodes, spinners)
        _running.remove(stop)
    if stop.error is not None:
        raise stop.error


def settle_heap() -> None:
    """Once the nodes are up: what exists now (modules, rclpy, SQLAlchemy, type stores)
    lives as long as the process, so the cyclic collector stops scanning it (gc.freeze),
    and it runs after 10,000 new container objects instead of 700.

    Why: re-scanning that heap cost the logger a noticeable share of its CPU at a high
    result rate, and what a result allocates is freed by reference counting anyway
    (docs/performance.md, "Why the code is shaped this way")."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


class _Spinner:
    """One node's executor in a thread of its own, spun until the stop request.

    Not executor.spin() ended by shutdown(): shutdown() destroys the executor's guard
    condition while the spinning thread may still be finishing a callback (which then
    raises in the executor). Here the loop ends first, its callback in progress with it,
    and only then is the executor shut down."""

    def __init__(self, node: Node, executor: Executor, stop: _StopRequest):
        # Single-threaded: each callback runs in the spin thread, so joining the thread
        # waits for all of them. rclpy offers no public way to wait, with a time limit,
        # for the callbacks a MultiThreadedExecutor's pool still runs.
        if not isinstance(executor, SingleThreadedExecutor):
            raise TypeError(f"{type(executor).__name__} for {node.get_name()}: a node's "
                            "executor here is a SingleThreadedExecutor (or a subclass)")
        self.node, self.executor, self.stop = node, executor, stop
        # Triggered to wake the loop at once when the stop request comes. In a group of
        # its own: an executor that waits on one group (side_executor.MainExecutor) waits
        # on it too, and a callback running in the node's default group never holds it.
        self.wake = node.create_guard_condition(
            lambda: None, callback_group=MutuallyExclusiveCallbackGroup())
        executor.add_node(node)  # after init: an executor needs a live context
        # A daemon: a callback still running when the wait runs out (a long pass) must not
        # keep the process alive; its transaction is then rolled back, as after kill -9.
        self.thread = threading.Thread(target=self._run, name=f"spin_{node.get_name()}",
                                       daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stop.event.is_set() and rclpy.ok():
                self.executor.spin_once()
        except ExternalShutdownException:  # the context went first: stop the process too
            pass
        except BaseException as exc:
            if self.stop.event.is_set():  # a callback outlived the wait and the node went
                print(f"robot_memory: {self.node.get_name()} stopped mid-callback: {exc}",
                      file=sys.stderr, flush=True)
            else:  # a callback raised: stop everything, report it once
                self.stop.fail(exc)
            return
        self.stop.event.set()

    def finish(self) -> None:
        """Wait for the loop, and with it the callback it runs, then shut the executor
        down."""
        self.thread.join(JOIN_TIMEOUT_S)
        self.executor.shutdown()


def _shut_down(nodes: list[tuple[NodeSpec, Node]], spinners: list[_Spinner]) -> None:
    for spinner in spinners:
        spinner.wake.trigger()
    # Node by node in the order given: a node's executor stops (nothing more is answered
    # or accepted), then it flushes. A long pass in another node does not hold it back.
    for index, (spec, node) in enumerate(nodes):
        if index < len(spinners):
            spinners[index].finish()
        if spec.before_destroy is not None:
            _report_failure(f"flushing {node.get_name()}", spec.before_destroy, node)
    for _spec, node in nodes:
        partition = getattr(node, "partition", None)
        if partition is not None:
            _report_failure(f"closing the store of {node.get_name()}", partition.store.close)
    # Then the nodes and the context go, so the process leaves the graph as it exits (its
    # DDS participant says goodbye; peers do not wait out its lease).
    for _spec, node in nodes:
        _report_failure(f"destroying {node.get_name()}", destroy_lifecycle_node, node)
    rclpy.try_shutdown()


def _report_failure(what: str, action: Callable, *args) -> None:
    """One node's failing flush must not keep the others from flushing."""
    try:
        action(*args)
    except Exception as exc:
        print(f"robot_memory: {what} failed: {exc}", file=sys.stderr, flush=True)

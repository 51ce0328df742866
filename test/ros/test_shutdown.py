"""Ctrl-C as a terminal sends it: the signal reaches every process of the group, and a
second one follows within 50 ms (launch's own), while `ground` is answering about 50 times
a second and results keep arriving. Every answered consultation and every accepted result
is in the log afterwards, every process exits with code 0, and nothing prints a traceback.
The same for SIGTERM (launch's escalation, a service manager's stop)."""

import os
import signal
import threading
import time

import pytest

from robot_memory.ros.client import GroundingClient
from robot_memory.event_kinds import EXECUTION_RESULT, FACT_CONSULTATION
from robot_memory.ros.spin import _StopRequest
from robot_memory.store import MemoryStore, verify_chain

from ros.conftest import stack_log, wait_until

BEFORE = 40  # results accepted before the signal, all still pending in the logger


class Load:
    """`ground` at about 50 Hz and results at about 100 Hz, from threads of the test."""

    def __init__(self, probe):
        self.probe = probe
        self.grounding = GroundingClient(probe, timeout_s=1.0)
        self.answered: set[str] = set()
        self.published = 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._ground, daemon=True),
                        threading.Thread(target=self._publish, daemon=True)]

    def _ground(self) -> None:
        i = 0
        while not self.stop.is_set():
            answer = self.grounding.query("manipulation.grasp", "glass_cup", "sim_relaxed",
                                          intent_id=f"q-{i}")
            if answer.consultation_id:
                self.answered.add(answer.consultation_id)
            i += 1
            time.sleep(0.02)

    def _publish(self) -> None:
        while not self.stop.is_set():
            self.probe.publish_result(stamp_s=1000 + self.published,
                                      intent_id=f"late-{self.published}")
            self.published += 1
            time.sleep(0.01)

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(5)


@pytest.mark.parametrize("signum,one_process", [
    (signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGINT, True)],
    ids=["sigint_four_processes", "sigterm_four_processes", "sigint_one_process"])
def test_group_signal_twice_under_load_loses_nothing(probe, start_stack, certified_hash,
                                                     db_url, signum, one_process):
    # Long periods: mostly the shutdown flush writes what is pending or queued.
    stack = start_stack(own_process_group=True, flush_period_s=10.0,
                        audit_flush_period_s=10.0, period_s=3600.0)
    probe.wait_identity()
    probe.wait_logger()
    wait_until(lambda: probe.grounding.query("manipulation.grasp").status
               != "IDENTITY_UNVERIFIED", 30, "the grounding server to activate")
    for i in range(BEFORE):
        probe.publish_result(stamp_s=i, intent_id=f"early-{i}")
    wait_until(lambda: int(probe.diagnostics.get("episodic_logger", {}).get("accepted", 0))
               >= BEFORE, 30, lambda: f"{BEFORE} accepted results ({probe.diagnostics})")

    with Load(probe) as load:
        wait_until(lambda: len(load.answered) >= 20 and load.published >= 40, 30,
                   "answers and results under load")
        os.killpg(stack.pgid, signum)
        time.sleep(0.02)
        os.killpg(stack.pgid, signum)  # the second one lands in the shutdown path
        for process in stack.processes.values():
            process.wait(30)
    answered = set(load.answered)

    assert {name: p.returncode for name, p in stack.processes.items()} == \
        {name: 0 for name in stack.processes}
    log = stack_log(stack)
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log[-3000:]
    part = MemoryStore(db_url).partition(certified_hash)
    consulted = {e.payload["consultation_id"] for e in part.events([FACT_CONSULTATION])}
    assert answered - consulted == set(), f"{len(answered - consulted)} answers not audited"
    intents = [e.payload["intent_id"] for e in part.events([EXECUTION_RESULT])]
    assert len(intents) == len(set(intents)), "a result stored twice"
    assert {f"early-{i}" for i in range(BEFORE)} <= set(intents)
    assert any(i.startswith("late-") for i in intents)  # results arriving under load too
    assert verify_chain(part).ok


def test_a_signal_landing_inside_the_wait_does_not_deadlock_it():
    """A second signal can land while the main thread, just woken by the first, still
    holds the lock of the Event it waited on: the handler must not need that lock."""
    stop = _StopRequest()
    handled = threading.Event()

    def main_thread_interrupted_inside_event_wait():
        with stop.event._cond:  # where Event.wait holds it as it returns
            stop.on_signal(signal.SIGTERM, None)
        handled.set()

    threading.Thread(target=main_thread_interrupted_inside_event_wait, daemon=True).start()
    assert handled.wait(5), "the signal handler waited for the lock its own thread holds"
    waiter = threading.Thread(target=stop.wait, daemon=True)
    waiter.start()
    waiter.join(5)
    assert not waiter.is_alive() and stop.event.is_set()


def rclpy_loaded(pid: int) -> bool:
    """The process is importing (or past) rclpy: its entry point's handlers are in place."""
    try:
        return "_rclpy_pybind11" in open(f"/proc/{pid}/maps").read()
    except OSError:
        return False


def test_group_signal_while_starting_exits_quietly(start_stack):
    stack = start_stack(own_process_group=True)
    wait_until(lambda: all(rclpy_loaded(p.pid) for p in stack.processes.values()), 30,
               "the node processes to import rclpy")
    os.killpg(stack.pgid, signal.SIGINT)
    time.sleep(0.02)
    os.killpg(stack.pgid, signal.SIGINT)
    for process in stack.processes.values():
        process.wait(30)
    log = stack_log(stack)
    assert {name: p.returncode for name, p in stack.processes.items()} == \
        {name: 0 for name in stack.processes}, log[-3000:]
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log[-3000:]


def test_the_grounding_server_stops_at_once_though_its_main_executor_waits_on_ground_alone(
        tmp_path):
    """Its main executor waits on `ground` alone: the stop request's guard condition must
    wake it too, or the process waits out the spinner's 10 s join before it exits."""
    import subprocess
    import sys
    process = subprocess.Popen(
        [sys.executable, "-m", "robot_memory.ros.grounding_server", "--ros-args", "-p",
         f"database_url:=sqlite:///{tmp_path / 'memory.db'}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(50):  # its first status line says it is spinning
            if "waiting for manifest_verifier" in process.stdout.readline():
                break
        process.send_signal(signal.SIGINT)
        process.wait(timeout=5.0)  # well under the 10 s join it waited before
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0

"""kill -9 of the logger while a skill in its own process publishes: the restarted logger
gets what the publisher still holds (transient-local on both sides, durable_results), and
stores each result once. Those the killed logger had stored come again and are skipped
(counted as redelivered). Those it had taken but not written, and those published while
no logger ran, are stored."""

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from robot_memory.event_kinds import EXECUTION_RESULT
from robot_memory.store import MemoryStore, verify_chain

from ros.conftest import BOTH_PROCESS_MODES, wait_until

SENT = 600  # within the publisher's history (EXECUTION_RESULTS_QOS: the last 15,000)
PUBLISHER = str(Path(__file__).with_name("restart_publisher.py"))


def stored_intents(db_url: str, identity_hash: str, name: str = "restart") -> Counter:
    """How many times each of the publisher's results is in the log."""
    store = MemoryStore(db_url)
    try:
        return Counter(event.payload["intent_id"]
                       for event in store.partition(identity_hash).events([EXECUTION_RESULT])
                       if event.payload["intent_id"].startswith(f"{name}-"))
    finally:
        store.close()


def start_publisher(namespace: str, *options: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, PUBLISHER, f"/{namespace}/execution_results",
                             str(SENT), *options],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def kill_the_logger_after_it_stored_some(stack, publisher, db_url, identity_hash) -> Counter:
    """Kill -9 the logger once it has stored some of the first half, have the publisher
    send the second half while none runs; what the killed logger stored."""
    assert publisher.stdout.readline().strip() == "ready"
    assert publisher.stdout.readline().strip() == "half"
    wait_until(lambda: stored_intents(db_url, identity_hash), 60, "the first results stored")
    os.kill(stack.process_of("episodic_logger").pid, signal.SIGKILL)
    stack.process_of("episodic_logger").wait()
    stored = stored_intents(db_url, identity_hash)
    publisher.stdin.write("go\n")
    publisher.stdin.flush()
    assert publisher.stdout.readline().strip() == "sent"
    return stored


def close(publisher: subprocess.Popen) -> None:
    publisher.stdin.close()
    try:
        publisher.wait(timeout=30)
    except subprocess.TimeoutExpired:
        publisher.kill()


@BOTH_PROCESS_MODES
def test_a_logger_killed_and_restarted_stores_each_result_the_publisher_holds_once(
        probe, start_stack, tmp_path, certified_hash, db_url):
    stack = start_stack(durable_results=True)
    probe.wait_identity()
    probe.wait_logger()
    publisher = start_publisher(probe.namespace)
    try:
        # Killed once it has stored some: those come again after the restart.
        stored_by_the_killed_logger = kill_the_logger_after_it_stored_some(
            stack, publisher, db_url, certified_hash)
        with open(tmp_path / "stack.log", "ab") as log:
            stack.respawn("episodic_logger", stdout=log, stderr=log)
        wait_until(lambda: len(stored_intents(db_url, certified_hash)) == SENT, 120,
                   lambda: f"all {SENT} results stored, "
                           f"{len(stored_intents(db_url, certified_hash))} are")
        # The respawned logger has taken the whole history: the stored ones, skipped.
        diagnostics = wait_until(
            lambda: (d := probe.diagnostics.get("episodic_logger")) and
            d.get("redelivered") == str(len(stored_by_the_killed_logger)) and d, 30,
            lambda: f"{len(stored_by_the_killed_logger)} redelivered, diagnostics say "
                    f"{probe.diagnostics.get('episodic_logger', {}).get('redelivered')}")
    finally:
        close(publisher)
    stored = stored_intents(db_url, certified_hash)
    assert stored == Counter({f"restart-{i}": 1 for i in range(SENT)})  # each one, once
    assert 0 < sum(stored_by_the_killed_logger.values()) < SENT  # the restart mattered
    assert diagnostics["lost_total"] == "0" and diagnostics["rejected_total"] == "0"
    store = MemoryStore(db_url)
    try:
        assert verify_chain(store.partition(certified_hash)).ok
    finally:
        store.close()


def test_with_a_volatile_publisher_and_reader_a_restart_loses_what_was_sent_meanwhile(
        probe, start_stack, tmp_path, certified_hash, db_url):
    """durable_results false, for volatile publishers: heard, and what they publish while
    no logger runs is lost (docs/operations.md, "Restarts"), never stored twice."""
    stack = start_stack(durable_results=False)
    probe.wait_identity()
    probe.wait_logger()
    publisher = start_publisher(probe.namespace, "volatile")
    try:
        stored_by_the_killed_logger = kill_the_logger_after_it_stored_some(
            stack, publisher, db_url, certified_hash)
        with open(tmp_path / "stack.log", "ab") as log:
            stack.respawn("episodic_logger", stdout=log, stderr=log)
        publisher.stdin.write("late\n")  # results until one reaches the new logger
        publisher.stdin.flush()
        wait_until(lambda: stored_intents(db_url, certified_hash, "late"), 120,
                   "a result published after the restart stored")
    finally:
        close(publisher)
    assert stored_intents(db_url, certified_hash) == stored_by_the_killed_logger
    assert set(stored_by_the_killed_logger.values()) == {1}
    assert set(stored_intents(db_url, certified_hash, "late").values()) == {1}
    assert probe.diagnostics["episodic_logger"]["durability"] == "volatile"

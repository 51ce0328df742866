"""kill -9 in the middle of work: the logger during sustained ingest (every acknowledged
event is there exactly once after the respawn, and the chain verifies), the consolidator
mid-pass (the next pass gives a byte-equal snapshot)."""

import os
import signal
import sqlite3
import threading
import time

from helpers import varied_events
from lifecycle_msgs.msg import State
from lifecycle_msgs.srv import GetState
from sqlalchemy import text

from robot_memory.consolidation import consolidation_pass
from robot_memory.consolidation.consolidation_pass import facts_snapshot
from robot_memory.event_kinds import EXECUTION_RESULT
from robot_memory.msg import ExecutionResult, KeyValue
from robot_memory.srv import Consolidate, RecordEvent
from robot_memory.ros.credentials import sign_message
from robot_memory.store import MemoryStore, verify_chain

from ros.conftest import BOTH_PROCESS_MODES, OPERATOR_KEY, wait_until


def attempt(n: int) -> ExecutionResult:
    msg = ExecutionResult(skill_id="manipulation.grasp", target_class="glass_cup",
                          environment="sim_relaxed", success=n % 3 != 0,
                          intent_id=f"ack-{n}", failure_reason="" if n % 3 else "slipped")
    msg.parameters = [KeyValue(key="force_n", value=20.0 + n % 10)]
    msg.header.stamp.sec = 1000 + n
    return msg


def call_or_none(probe, srv_type, name, request, timeout=20.0, signed=False):
    """A call that may go unanswered: until discovery drops the killed process, a request
    can still be routed to it. `signed`: by the operator (a new credential each call)."""
    try:
        return (probe.call_signed if signed else probe.call)(srv_type, name, request, timeout)
    except AssertionError:
        return None


class Producer:
    """A skill that needs acknowledgements: record_event in a loop, remembering what was
    acknowledged; a call whose answer never comes (the logger died) counts as not."""

    def __init__(self, probe):
        self.client = probe.create_client(RecordEvent, "record_event")
        self.acked: dict[str, int] = {}
        self.unanswered = 0
        self.calls = 0
        self.refusals: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def __str__(self) -> str:
        return (f"{self.calls} calls: {len(self.acked)} acknowledged, {self.unanswered} "
                f"unanswered, refused {self.refusals[-3:]}")

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            if not self.client.wait_for_service(timeout_sec=0.2):
                continue
            self.calls += 1
            future = self.client.call_async(RecordEvent.Request(result=attempt(n)))
            deadline = time.monotonic() + 3.0
            while not future.done() and time.monotonic() < deadline:
                time.sleep(0.002)
            if future.done() and future.result().accepted:
                self.acked[f"ack-{n}"] = future.result().event_id
            elif not future.done():
                self.unanswered += 1
            else:
                self.refusals.append(future.result().reason)
            n += 1


def topic_results_stored(db_url: str) -> int:
    store = MemoryStore(db_url)
    try:
        with store.read() as conn:
            return conn.execute(text(
                "SELECT count(*) FROM events WHERE kind = 'execution_result' "
                "AND payload_json LIKE :topic"), {"topic": '%"intent_id":"topic-%'}).scalar()
    finally:
        store.close()


@BOTH_PROCESS_MODES
def test_kill_9_logger_during_ingest_loses_no_acknowledged_event(probe, start_stack, tmp_path,
                                                                 certified_hash, db_url):
    stack = start_stack()
    probe.wait_identity()
    producer = Producer(probe)
    producer.thread.start()
    probe.wait_logger()
    stop_flood = threading.Event()

    def flood():  # topic traffic alongside, so the kill lands mid-batch
        i = 0
        while not stop_flood.is_set():
            probe.publish_result(stamp_s=5000 + i, intent_id=f"topic-{i}")
            i += 1
            time.sleep(0.002)

    flooder = threading.Thread(target=flood, daemon=True)
    flooder.start()
    try:
        # Topic results are not acknowledged: wait until some are stored, so the kill
        # lands while the logger takes them (their reader has been matched by then).
        wait_until(lambda: len(producer.acked) >= 40 and topic_results_stored(db_url) > 0, 60,
                   lambda: f"40 acknowledged events and stored topic results ({producer})")
        os.kill(stack.process_of("episodic_logger").pid, signal.SIGKILL)
        stack.process_of("episodic_logger").wait()
        acked_before_kill = len(producer.acked)
        with open(tmp_path / "stack.log", "ab") as log:
            stack.respawn("episodic_logger", stdout=log, stderr=log)
        wait_until(lambda: len(producer.acked) >= acked_before_kill + 20, 60,
                   lambda: f"acknowledgements from the respawned logger ({producer})")
    finally:  # stop the threads even on failure: they would outlive this probe
        producer.stop.set()
        stop_flood.set()
        producer.thread.join(10)
        flooder.join(10)

    part = MemoryStore(db_url).partition(certified_hash)
    stored = {}
    for event in part.events([EXECUTION_RESULT]):
        intent = event.payload["intent_id"]
        assert intent not in stored, f"{intent} stored twice"
        stored[intent] = event.id
    for intent, event_id in producer.acked.items():
        assert stored.get(intent) == event_id, f"acknowledged {intent} missing or moved"
    assert verify_chain(part).ok
    assert any(k.startswith("topic-") for k in stored)  # the flood really was logged


def test_kill_9_consolidator_mid_pass_then_next_pass_is_byte_equal(probe, start_stack, tmp_path,
                                                                   certified_hash, db_url):
    events = varied_events(20000)
    reference = MemoryStore(f"sqlite:///{tmp_path / 'reference.db'}").partition(certified_hash)
    reference.append_many(events)
    victim = MemoryStore(db_url).partition(certified_hash)
    victim.append_many(events)

    stack = start_stack(period_s=3600.0, pass_after_new_events=0, full_check_after_boot=False)
    probe.wait_identity()
    client = probe.create_client(Consolidate, "consolidate")
    assert client.wait_for_service(timeout_sec=30)
    wait_until(lambda: probe.call(GetState, "consolidator/get_state", GetState.Request())
               .current_state.id == State.PRIMARY_STATE_ACTIVE, 30, "consolidator active")
    # Hold the store's write lock: the pass reads and computes, then waits to commit, so
    # the kill lands mid-pass however fast the pass is.
    blocker = sqlite3.connect(db_url[len("sqlite:///"):], isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    # its answer never comes
    client.call_async(sign_message(OPERATOR_KEY, client.service_name,
                                   Consolidate.Request(dry_run=False)))
    time.sleep(1.0)
    os.kill(stack.processes["consolidator"].pid, signal.SIGKILL)
    stack.processes["consolidator"].wait()
    blocker.execute("ROLLBACK")
    blocker.close()
    assert victim.facts() == []  # the killed pass left nothing behind
    with open(tmp_path / "stack.log", "ab") as log:
        stack.respawn("consolidator", stdout=log, stderr=log)
    answer = wait_until(lambda: (r := call_or_none(probe, Consolidate, "consolidate",
                                                   Consolidate.Request(dry_run=False),
                                                   signed=True))
                        and r.success and r, 120, "a pass by the respawned consolidator")
    assert answer.events_read >= 20000
    consolidation_pass(reference)
    assert facts_snapshot(victim) == facts_snapshot(reference)

"""record_event with a request id, through real node processes over DDS: a skill that
retries after a lost reply stores its result once, whether the retry comes at once, from
two clients at the same moment, or after the logger was killed and respawned; the same
id with another result is refused; a malformed or sensitive id is refused like a bad
result."""

import os
import signal
import time

from robot_memory.event_kinds import EXECUTION_RESULT, PRIVACY_REJECTION
from robot_memory.msg import IdentityStatus
from robot_memory.srv import RecordEvent
from robot_memory.store import MemoryStore

from ros.conftest import wait_until
from ros.test_governance import result, wait_active


def request(msg, request_id: str) -> RecordEvent.Request:
    return RecordEvent.Request(result=msg, request_id=request_id)


def send(probe, msg, request_id: str, timeout: float = 30.0) -> RecordEvent.Response:
    return probe.call(RecordEvent, "record_event", request(msg, request_id), timeout)


def stored_intents(db_url: str, identity_hash: str) -> list[str]:
    store = MemoryStore(db_url)
    try:
        return [e.payload["intent_id"]
                for e in store.partition(identity_hash).events([EXECUTION_RESULT])]
    finally:
        store.close()


def rejections(db_url: str, identity_hash: str) -> list[dict]:
    store = MemoryStore(db_url)
    try:
        return [e.payload for e in store.partition(identity_hash).events([PRIVACY_REJECTION])]
    finally:
        store.close()


def both_at_once(probe, msg, request_id: str) -> list[RecordEvent.Response]:
    """The same request from two clients at the same moment (two skills' threads)."""
    clients = [probe.create_client(RecordEvent, "record_event") for _ in range(2)]
    for client in clients:
        assert client.wait_for_service(timeout_sec=30)
    time.sleep(0.5)  # let the server match both clients
    futures = [client.call_async(request(msg, request_id)) for client in clients]
    wait_until(lambda: all(f.done() for f in futures), 30, "both answers")
    return [f.result() for f in futures]


def test_a_retried_record_event_is_stored_once_also_across_a_logger_restart(
        probe, start_stack, certified_hash, db_url, tmp_path):
    stack = start_stack()
    assert probe.wait_identity().state == IdentityStatus.VERIFIED
    wait_active(probe)
    grasp = result(5, intent_id="grasp-1")
    first = send(probe, grasp, "grasp/attempt-1")
    assert first.accepted and not first.replayed and first.event_id > 0
    retry = send(probe, grasp, "grasp/attempt-1")
    assert (retry.accepted, retry.replayed, retry.event_id, retry.seq) == \
        (True, True, first.event_id, first.seq)

    other = send(probe, result(6, intent_id="grasp-1", success=False,
                               failure_reason="slipped"), "grasp/attempt-1")
    assert not other.accepted and \
        other.reason_code == RecordEvent.Response.REASON_REQUEST_ID_REUSED
    assert other.reason.startswith("request_id: ")

    answers = both_at_once(probe, result(7, intent_id="dock-1"), "dock-1")
    assert all(a.accepted for a in answers)
    assert len({(a.event_id, a.seq) for a in answers}) == 1
    assert sorted(a.replayed for a in answers) == [False, True]

    for bad, code in (("x" * 129, RecordEvent.Response.REASON_INVALID),
                      ("two words", RecordEvent.Response.REASON_INVALID),
                      ("AKIAIOSFODNN7EXAMPLE", RecordEvent.Response.REASON_PRIVACY)):
        refused = send(probe, result(8, intent_id="bad-id"), bad)
        assert (refused.accepted, refused.reason_code) == (False, code)
        assert refused.reason.startswith("request_id: ") and "AKIA" not in refused.reason

    counts = ("replayed_requests", "rejected.request_id_reused",
              "rejected.invalid_request_id", "rejected.privacy_api_key")
    wait_until(lambda: (d := probe.diagnostics.get("episodic_logger")) and
               tuple(d.get(key) for key in counts) == ("2", "1", "2", "1"), 20,
               lambda: f"the counts, {probe.diagnostics.get('episodic_logger')}")

    # Written with the next batch (a refusal is not acknowledged): before the kill.
    wait_until(lambda: rejections(db_url, certified_hash) == [
        {"source": "record_event", "field": "request_id", "category": "api_key"}], 20,
        lambda: f"the privacy_rejection event, {rejections(db_url, certified_hash)}")

    # The reply lost with the logger: killed, respawned, the skill retries.
    logger = stack.process_of("episodic_logger")
    os.kill(logger.pid, signal.SIGKILL)
    logger.wait()
    with open(tmp_path / "stack.log", "ab") as log:
        stack.respawn("episodic_logger", stdout=log, stderr=log)
    wait_active(probe)
    after = wait_until(lambda: (a := send(probe, grasp, "grasp/attempt-1")).accepted and a, 60,
                       "the retry answered by the respawned logger")
    assert (after.replayed, after.event_id, after.seq) == (True, first.event_id, first.seq)
    assert stored_intents(db_url, certified_hash) == ["grasp-1", "dock-1"]

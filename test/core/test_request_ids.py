"""Acknowledged writes with a request id, without ROS, on a real SQLite file and on a real
PostgreSQL server: a retry is stored once and answered with the first commit's event,
also when both are queued at once and after the writer (the logger) restarts; the same
id with another result is refused; malformed and sensitive ids are refused and counted;
no id means no idempotence, as before."""

import threading

import pytest

from robot_memory.retention.compaction import compact
from robot_memory.consolidation import consolidation_pass
from robot_memory.event_kinds import EXECUTION_RESULT, PRIVACY_REJECTION
from robot_memory.intake.ingest import INVALID, PRIVACY, Ingest, Refused
from robot_memory.intake.requests import Replayed, RequestIdReused
from robot_memory.store import MemoryStore, verify_chain

A = "a" * 64


def fields(i: int, **changes) -> dict:
    data = {"stamp_ns": 0, "skill_id": "manipulation.grasp", "target_class": "glass_cup",
            "environment": "sim", "zone": "", "parameters": {"force_n": 20.0},
            "observations": {}, "success": True, "failure_reason": "", "duration_s": 1.0,
            "intent_id": f"r{i}", "notes": ""}
    return {**data, **changes}


def send(ingest, data: dict, request_id: str, received_ns: int = 5 * 10**9):
    """One record_event call: its future, or the Refused. A stamp of 0 takes the receipt
    time, which differs between a call and its retry: the retry is recognised all the same."""
    write = ingest.take_request(dict, dict(data), "record_event", received_ns, request_id)
    return write if isinstance(write, Refused) else ingest.record_event(write)


def results(part) -> list[str]:
    return [e.payload["intent_id"] for e in part.events([EXECUTION_RESULT])]


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'memory.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def opened():
    """Stores and writers opened by a test, closed after it (writers first)."""
    made = []

    def open_(url):
        store = MemoryStore(url)
        ingest = Ingest(store.partition(A), flush_period_s=0.01)
        made.append((store, ingest))
        return store.partition(A), ingest

    yield open_
    for store, ingest in made:
        ingest.close(timeout=2.0)
        store.close()


def test_a_retry_is_stored_once_and_answered_with_the_first_commit(url, opened):
    part, ingest = opened(url)
    first = send(ingest, fields(1), "grasp/attempt-1").result(10)
    retry = send(ingest, fields(1), "grasp/attempt-1", received_ns=9 * 10**9).result(10)
    assert retry == Replayed(first.id, first.seq)
    assert type(first) is not Replayed
    assert results(part) == ["r1"]
    assert (ingest.accepted, ingest.written, ingest.replayed) == (1, 1, 1)
    assert part.recorded_request("grasp/attempt-1")[:2] == (first.id, first.seq)


def test_requests_queued_at_once_with_the_same_id_are_stored_once(url, opened):
    part, ingest = opened(url)
    start = threading.Barrier(8)
    answers = []

    def caller():
        start.wait()
        answers.append(send(ingest, fields(2), "7c0e2b1a-dock").result(10))

    threads = [threading.Thread(target=caller) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert len(answers) == 8
    assert len({(a.id, a.seq) for a in answers}) == 1
    assert sum(type(a) is not Replayed for a in answers) == 1
    assert results(part) == ["r2"] and ingest.replayed == 7


def test_a_retry_after_the_logger_restarts_is_stored_once(url, opened):
    part, ingest = opened(url)
    first = send(ingest, fields(3), "retry-after-restart").result(10)
    ingest.close()
    part.store.close()
    part, ingest = opened(url)  # a new process would open the store the same way
    assert send(ingest, fields(3), "retry-after-restart").result(10) == \
        Replayed(first.id, first.seq)
    assert results(part) == ["r3"] and verify_chain(part).ok


def test_the_same_id_with_another_result_is_refused_and_counted(url, opened):
    part, ingest = opened(url)
    send(ingest, fields(4), "once").result(10)
    with pytest.raises(RequestIdReused, match="request_id: 'once' was acknowledged for a "
                                              "different result"):
        send(ingest, fields(4, success=False, failure_reason="slipped"), "once").result(10)
    assert results(part) == ["r4"]
    assert ingest.rejected["request_id_reused"] == 1 and ingest.accepted == ingest.written


def test_without_an_id_every_call_stores(url, opened):
    part, ingest = opened(url)
    a, b = (send(ingest, fields(5), "").result(10) for _ in range(2))
    assert a.id != b.id and results(part) == ["r5", "r5"]


@pytest.mark.parametrize("request_id, reason, code", [
    ("x" * 129, "invalid_request_id", INVALID),
    ("attempt 1", "invalid_request_id", INVALID),
    ("naïve", "invalid_request_id", INVALID),
    ("AKIAIOSFODNN7EXAMPLE", "privacy_api_key", PRIVACY),
    ("call-415-555-0123", "privacy_phone_number", PRIVACY),
])
def test_a_malformed_or_sensitive_id_is_refused_with_its_result(tmp_path, opened, request_id,
                                                                reason, code):
    part, ingest = opened(f"sqlite:///{tmp_path / 'memory.db'}")
    refused = send(ingest, fields(6), request_id)
    assert isinstance(refused, Refused) and (refused.code, refused.reason) == (code, reason)
    assert refused.detail.startswith("request_id: ") and request_id not in refused.detail
    assert ingest.rejected[reason] == 1
    assert ingest.flush() and results(part) == []
    rejections = [e.payload for e in part.events([PRIVACY_REJECTION])]
    assert rejections == ([{"source": "record_event", "field": "request_id",
                            "category": reason[len("privacy_"):]}] if code == PRIVACY else [])


def test_an_id_of_the_longest_length_and_every_allowed_character_is_kept(tmp_path, opened):
    part, ingest = opened(f"sqlite:///{tmp_path / 'memory.db'}")
    request_id = ("grasp.v2_run:7/attempt-" + "x" * 128)[:128]
    first = send(ingest, fields(7), request_id).result(10)
    assert part.recorded_request(request_id)[:2] == (first.id, first.seq)


def test_an_id_lives_as_long_as_its_event(tmp_path, opened):
    """A compaction that removes an event removes its request id (so the table holds at
    most the live results); a retry of it is then stored again, a newer one still not."""
    part, ingest = opened(f"sqlite:///{tmp_path / 'memory.db'}")
    old = send(ingest, fields(8, stamp_ns=10**9), "old").result(10)
    for i in range(20):
        send(ingest, fields(100 + i, stamp_ns=2 * 10**9 + i), f"filler-{i}").result(10)
    consolidation_pass(part)
    new = send(ingest, fields(9, stamp_ns=3 * 10**9), "new").result(10)
    assert compact(part, old.seq + 5, tmp_path / "segments").compaction
    assert part.recorded_request("old") is None
    assert part.recorded_request("new")[:2] == (new.id, new.seq)
    assert send(ingest, fields(9, stamp_ns=3 * 10**9), "new").result(10) == \
        Replayed(new.id, new.seq)
    assert type(send(ingest, fields(8, stamp_ns=10**9), "old").result(10)) is not Replayed

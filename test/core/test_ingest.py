"""The intake core without ROS, on real SQLite files: batching in arrival order,
acknowledged writes, refusals and loss counted by cause, a failing store, kill -9."""

import os
import signal
import subprocess
import sys
import time

import pytest
from sqlalchemy import event

from robot_memory.event_kinds import EXECUTION_RESULT, PRIVACY_REJECTION
from robot_memory.retention.growth import GrowthGuard
from robot_memory.intake.ingest import (INVALID, PRIVACY, STORE_FULL, Ingest, Refused,
                                        StoreWriteFailed)
from robot_memory.store import MemoryStore, verify_chain

A = "a" * 64


def fields(i: int, **changes) -> dict:
    data = {"stamp_ns": 1_000_000_000 + i, "skill_id": "manipulation.grasp",
            "target_class": "glass_cup", "environment": "sim", "zone": "",
            "parameters": {"force_n": 20.0}, "observations": {}, "success": True,
            "failure_reason": "", "duration_s": 1.0, "intent_id": f"r{i}", "notes": ""}
    return {**data, **changes}


def take(ingest, data: dict, source: str = "t", received_ns: int = 0):
    """A result as the logger's intake takes it (its fields already read), or Refused."""
    return ingest.take_received(dict, data, source, received_ns)


def queue(ingest, data: dict, source: str = "t") -> bool:
    """A topic's result taken and queued; False if refused or not queued."""
    event = take(ingest, data, source)
    return not isinstance(event, Refused) and ingest.submit_events([event]) == 0


def acknowledged(ingest, data: dict, source: str = "record_event"):
    """A record_event write: the future of its commit."""
    return ingest.record_event(take(ingest, data, source))


def intents(part) -> list[str]:
    return [e.payload["intent_id"] for e in part.events([EXECUTION_RESULT])]


@pytest.fixture
def part(db_url):
    store = MemoryStore(db_url)
    yield store.partition(A)
    store.close()


@pytest.fixture
def make_ingest():
    made = []

    def make(partition, **options):
        made.append(Ingest(partition, **options))
        return made[-1]

    yield make
    for ingest in made:
        ingest.close(timeout=1.0)


def test_topic_results_are_written_in_batches_in_arrival_order(part, make_ingest):
    ingest = make_ingest(part, flush_period_s=0.01)
    for i in range(500):
        assert queue(ingest, fields(i), "execution_results")
    assert ingest.flush()
    assert intents(part) == [f"r{i}" for i in range(500)]
    assert (ingest.accepted, ingest.written, ingest.pending) == (500, 500, 0)
    assert verify_chain(part).ok


def test_write_now_has_the_writer_write_without_waiting_for_its_period(part, make_ingest):
    """The intake calls write_now after each round: what it queued is written then, not
    at the writer's next period (an hour here)."""
    ingest = make_ingest(part, flush_period_s=3600.0)
    time.sleep(0.2)  # the writer is now waiting out its period
    for i in range(50):
        assert queue(ingest, fields(i), "execution_results")
    ingest.write_now()
    deadline = time.monotonic() + 30.0
    while ingest.written < 50 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ingest.written == 50 and ingest.pending == 0
    assert intents(part) == [f"r{i}" for i in range(50)]


def test_an_acknowledged_write_lands_after_what_was_pending_and_only_once_committed(
        part, make_ingest):
    ingest = make_ingest(part, flush_period_s=60.0)  # only the acknowledged write flushes
    for i in range(5):
        queue(ingest, fields(i), "execution_results")
    assert part.count_events() == 0
    stored = acknowledged(ingest, fields(99, intent_id="acked")).result(timeout=10)
    assert stored.seq == 6 and part.event_by_id(stored.id).payload["intent_id"] == "acked"
    assert intents(part) == ["r0", "r1", "r2", "r3", "r4", "acked"]


def test_refusals_are_counted_by_reason_and_privacy_is_logged_without_the_value(
        part, make_ingest):
    ingest = make_ingest(part, flush_period_s=0.01)
    empty = take(ingest, fields(1, skill_id=""), "execution_results")
    assert (empty.code, empty.reason) == (INVALID, "empty_skill_id")
    assert empty.detail.startswith("skill_id:")
    secret = take(ingest, fields(2, notes="mail jane.doe@example.org"), "record_event")
    assert (secret.code, secret.reason) == (PRIVACY, "privacy_email")

    def duplicate(_given):  # a conversion error found by the reader (duplicate keys)
        from robot_memory.intake.records import pairs_to_dict
        return {**fields(5), "parameters": pairs_to_dict("parameters", [("f", 1.0)] * 2)}

    refused = ingest.take_received(duplicate, b"", "execution_results", 0)
    assert (refused.code, refused.reason) == (INVALID, "duplicate_key")
    assert ingest.flush()
    contradictory = take(ingest, fields(3, failure_reason="slipped"))  # success and a reason
    assert (contradictory.code, contradictory.reason) == (INVALID, "contradictory_result")
    assert ingest.rejected == {"empty_skill_id": 1, "privacy_email": 1, "duplicate_key": 1,
                               "contradictory_result": 1}
    assert ingest.lost == {}  # refusals by rule are not loss
    [rejection] = part.events([PRIVACY_REJECTION])
    assert rejection.payload == {"source": "record_event", "field": "notes",
                                 "category": "email"}
    assert part.count_events(EXECUTION_RESULT) == 0 and ingest.written == 0


def test_a_full_backlog_refuses_and_counts_and_keeps_what_it_holds(part, make_ingest):
    ingest = make_ingest(part, max_pending=3, flush_period_s=60.0)
    taken = [queue(ingest, fields(i)) for i in range(5)]
    assert taken == [True, True, True, False, False]
    ingest.count("dds_lost", 7)
    assert ingest.lost == {"backlog_full": 2, "dds_lost": 7}
    assert ingest.flush()
    assert intents(part) == ["r0", "r1", "r2"]
    # stored + counted == offered
    assert part.count_events() + sum(ingest.lost.values()) == 5 + 7


def test_a_round_queued_at_once_keeps_its_order_and_refuses_only_what_overflows(
        part, make_ingest):
    ingest = make_ingest(part, max_pending=4, flush_period_s=60.0)
    assert queue(ingest, fields(0))
    assert ingest.submit_events([take(ingest, fields(i)) for i in range(1, 6)]) == 2
    assert ingest.submit_events([]) == 0
    assert ingest.accepted == 4 and ingest.lost == {"backlog_full": 2}
    assert ingest.flush()
    assert intents(part) == ["r0", "r1", "r2", "r3"]
    assert ingest.submit_events([take(ingest, fields(i)) for i in (6, 7)]) == 0
    assert ingest.flush() and intents(part) == ["r0", "r1", "r2", "r3", "r6", "r7"]


def test_the_topics_events_are_logged_as_records_are(tmp_path, make_ingest):
    """take_received (the fields given away, on the fast path, as the payload) stores the
    same bytes as the validated record's event, for results valid on the fast
    path or only through pydantic (an int force); refused and secret results (logged as
    a privacy_rejection event) take no place among them."""
    from robot_memory.intake.records import InvalidRecord, validate_record
    from robot_memory.store import NewEvent
    stream = [fields(0), fields(1, parameters={"force_n": 20}), fields(2, skill_id=""),
              fields(3, notes="token sk-" + "a" * 30), fields(4, observations={"m": 0.5}),
              {k: v for k, v in fields(5).items() if k != "zone"}]
    logged = {}
    for way in ("records", "events"):
        store = MemoryStore(f"sqlite:///{tmp_path / way}.db")
        ingest = make_ingest(store.partition(A), flush_period_s=60.0, now_ns=lambda: 42)
        queued = []
        for data in stream:
            if way == "records":
                try:
                    record = validate_record(dict(data))
                    queued.append(NewEvent(EXECUTION_RESULT, record.payload(),
                                           record.stamp_ns, True, True))
                except InvalidRecord:
                    pass
            else:
                event = take(ingest, dict(data))
                if not isinstance(event, Refused):
                    queued.append(event)
        assert ingest.submit_events(queued) == 0
        assert ingest.flush()
        with store.read() as conn:
            rows = conn.exec_driver_sql(
                "SELECT kind, stamp_ns, payload_json FROM events "
                "WHERE kind = 'execution_result' ORDER BY seq").all()
        logged[way] = rows
        if way == "events":
            assert [e.payload for e in store.partition(A).events(["privacy_rejection"])] \
                == [{"source": "t", "field": "notes", "category": "api_key"}]
            assert ingest.rejected == {"empty_skill_id": 1, "privacy_api_key": 1}
    assert logged["events"] == logged["records"] and len(logged["events"]) == 4


def cap_pages(store: MemoryStore, cap: dict) -> None:
    """Disk full, for real: new connections see a file that cannot grow past cap['pages']."""
    def on_connect(dbapi_connection, _record):
        if cap.get("pages"):
            dbapi_connection.execute(f"PRAGMA max_page_count={cap['pages']}")
    event.listen(store.engine, "connect", on_connect)


def test_a_failing_store_keeps_results_pending_fails_acks_and_recovers(db_url, make_ingest):
    MemoryStore(db_url).partition(A).append(EXECUTION_RESULT, fields(0), 1)
    store = MemoryStore(db_url)
    with store.read() as conn:
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar()
    cap = {"pages": pages}
    cap_pages(store, cap)
    part = store.partition(A)
    ingest = make_ingest(part, flush_period_s=0.01, retry_period_s=0.05)
    for i in range(1, 40):
        queue(ingest, fields(i, notes="x" * 1500))
    assert not ingest.flush(timeout=1.0)
    assert ingest.pending == 39 and "disk is full" in ingest.last_error
    with pytest.raises(StoreWriteFailed, match="disk is full"):
        acknowledged(ingest, fields(500, intent_id="acked-during")).result(10)
    assert ingest.rejected["store_error"] == 1 and ingest.lost == {"store_error": 1}
    cap["pages"] = None  # space is back; the next retry opens a fresh connection
    assert ingest.flush(timeout=20)
    stored = acknowledged(ingest, fields(501, intent_id="acked-after")).result(10)
    assert intents(part) == ["r0"] + [f"r{i}" for i in range(1, 40)] + ["acked-after"]
    assert stored.seq == 41 and ingest.last_error == "" and verify_chain(part).ok


def test_the_growth_guard_refuses_past_the_hard_limit(part, make_ingest):
    ingest = make_ingest(part, guard=GrowthGuard(0.0, 1e-6), size_of=lambda: 10_000)
    full = take(ingest, fields(1))
    assert full.code == STORE_FULL and "hard limit" in full.detail
    assert ingest.rejected == {"store_full": 1}


def test_close_writes_what_is_queued(part):
    ingest = Ingest(part, flush_period_s=60.0)
    for i in range(10):
        queue(ingest, fields(i))
    ingest.close()
    assert intents(part) == [f"r{i}" for i in range(10)]
    with pytest.raises(StoreWriteFailed):
        acknowledged(ingest, fields(11)).result(1)


ACKING_WRITER = """
import sys
from robot_memory.intake.ingest import Ingest
from robot_memory.store import MemoryStore
sys.path.insert(0, sys.argv[2])
from test_ingest import acknowledged, fields, queue
ingest = Ingest(MemoryStore(sys.argv[1]).partition("a" * 64), flush_period_s=0.02)
i = 0
while True:
    for j in range(20):  # topic traffic between the acknowledged writes
        queue(ingest, fields(i * 100 + j, intent_id=f"topic-{i}-{j}"))
    stored = acknowledged(ingest, fields(i, intent_id=f"ack-{i}")).result()
    print(f"ack-{i} {stored.id}", flush=True)
    i += 1
"""


def test_kill_9_loses_no_acknowledged_event(db_url, part, tmp_path):
    writer = subprocess.Popen([sys.executable, "-c", ACKING_WRITER, db_url,
                               os.path.dirname(__file__)], stdout=subprocess.PIPE, text=True)
    acked = {}
    try:
        deadline = time.monotonic() + 60
        while len(acked) < 50 and time.monotonic() < deadline:
            name, event_id = writer.stdout.readline().split()
            acked[name] = int(event_id)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    assert len(acked) >= 50
    stored = {e.payload["intent_id"]: e.id for e in part.events([EXECUTION_RESULT])}
    assert all(stored.get(name) == event_id for name, event_id in acked.items())
    assert verify_chain(part).ok


def test_refusals_leave_no_cyclic_garbage_that_would_hold_what_was_refused(part, make_ingest):
    """Each refused result, whatever refused it, must be freed when its caller lets go:
    the nodes run the cyclic collector rarely (after 10,000 new objects), so a refusal
    caught in a cycle kept its sample (1.6 MB each) for as long as the logger was quiet."""
    import gc

    ingest = make_ingest(part)

    def broken(_given):
        raise RuntimeError("a reader's surprise")

    cases = [(dict, fields(1, notes="x" * 1_600_000)),  # oversized, before the scan
             (dict, fields(2, notes="password=hunter2 " * 10)),  # privacy
             (dict, fields(3, skill_id="")),  # invalid, through pydantic
             (dict, fields(4, parameters={"f": float("nan")})),  # invalid, fast check
             (broken, b"\x00\x01 bytes")]  # malformed

    def refused(read, given) -> bool:  # keeps the answer in a local, as a node does
        taken = ingest.take_received(read, dict(given) if read is dict else given, "t", 5)
        return isinstance(taken, Refused)

    for read, given in cases:  # warm up: first calls build caches, not garbage
        refused(read, given)
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            for read, given in cases:
                assert refused(read, given)
        assert gc.collect() == 0, "a refusal left a reference cycle behind"
    finally:
        gc.enable()
    assert ingest.rejected["malformed"] == 4 and ingest.rejected["oversized"] == 4


class SampleSeen:
    """A receipt as the logger gives one (ros/redelivery.py's SampleId), without ROS."""

    def record_in(self, payload: dict) -> None:
        payload["publication_seq"] = 7


def test_a_receipt_is_recorded_in_the_payload_of_valid_results_on_either_path(
        part, make_ingest):
    ingest = make_ingest(part)
    fast = ingest.take_received(dict, fields(1), "t", 5, SampleSeen())
    # A field left to its default is not for the fast check: pydantic validates it.
    slow = ingest.take_received(dict, {k: v for k, v in fields(2).items() if k != "zone"},
                                "t", 5, SampleSeen())
    assert fast.payload["publication_seq"] == slow.payload["publication_seq"] == 7
    ingest.submit_events([fast, slow])
    assert ingest.flush()
    assert [e.payload["publication_seq"] for e in part.events([EXECUTION_RESULT])] == [7, 7]


def test_waiting_for_room_returns_once_the_writer_has_caught_up(part, make_ingest):
    """The logger's intake waits here, after a round that left results in the reader,
    for the writer to bring what is pending down to a bound: it returns at the commit,
    not at the timeout."""
    ingest = make_ingest(part, flush_period_s=3600.0)
    ingest.submit_events([take(ingest, fields(i)) for i in range(300)])
    assert not ingest.wait_until_pending_at_most(100, timeout=0.2)  # nothing written yet
    started = time.monotonic()
    ingest.write_now()
    assert ingest.wait_until_pending_at_most(100, timeout=30.0)
    assert ingest.pending <= 100 and time.monotonic() - started < 10.0
    assert ingest.wait_until_pending_at_most(300, timeout=0.0)  # already below: at once

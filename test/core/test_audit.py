from robot_memory.grounding.audit import AuditWriter
from robot_memory.event_kinds import FACT_CONSULTATION
from robot_memory.store import MemoryStore, NewEvent


def consultation(i):
    return NewEvent(FACT_CONSULTATION, {"consultation_id": str(i)}, i)


def test_overflow_is_counted_and_the_queue_is_flushed_on_close(db_url):
    part = MemoryStore(db_url).partition("f" * 64)
    writer = AuditWriter(part, max_queue=5, flush_period_s=60.0)
    accepted = [writer.submit(consultation(i)) for i in range(8)]
    assert accepted == [True] * 5 + [False] * 3
    assert (writer.overflowed, writer.depth) == (3, 5)
    writer.close()
    assert [e.payload["consultation_id"] for e in part.events([FACT_CONSULTATION])] == \
        ["0", "1", "2", "3", "4"]


def test_batches_are_written_in_the_background(db_url):
    part = MemoryStore(db_url).partition("f" * 64)
    writer = AuditWriter(part, flush_period_s=0.01)
    for i in range(20):
        writer.submit(consultation(i))
    import time
    deadline = time.monotonic() + 10
    # `written` is counted just after the commit: wait for both, not only the rows.
    while (part.count_events(FACT_CONSULTATION) < 20 or writer.written < 20) and \
            time.monotonic() < deadline:
        time.sleep(0.02)
    assert part.count_events(FACT_CONSULTATION) == 20 and writer.written == 20
    writer.close()

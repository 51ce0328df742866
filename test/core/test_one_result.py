"""One stored execution result as the aggregates of a range that holds only it
(`one_result_aggregates`): the same outcome row and values the store's GROUP BY gives
for that range, for valid results and for payloads the rules cannot read. `explain`
reads results one at a time this way, through the rules' set-based methods."""

from __future__ import annotations

import random

from robot_memory.event_kinds import EXECUTION_RESULT
from robot_memory.intake.records import ExecutionRecord
from robot_memory.store import MemoryStore, one_result_aggregates

IDENT = "e" * 64
BUCKET_NS = 3600 * 10**9


def _payloads(seed: int, count: int = 40) -> list[tuple[dict, int]]:
    rng = random.Random(seed)
    payloads = []
    for i in range(count):
        success = rng.random() < 0.6
        record = ExecutionRecord(
            stamp_ns=rng.randint(0, 10**6) * 10**9, skill_id=rng.choice(["grasp", "dock"]),
            target_class=rng.choice(["cup", ""]), environment=rng.choice(["lab", ""]),
            zone=rng.choice(["", "zone_a"]),
            parameters={"force_n": rng.choice([5.0, 15.5])} if rng.random() < 0.7 else {},
            observations={"mass_kg": rng.choice([0.1, 0.25])} if rng.random() < 0.7 else {},
            success=success, failure_reason="" if success else rng.choice(["slipped", ""]))
        payloads.append((record.payload(), record.stamp_ns))
        if i % 9 == 0:  # a hand-made row the rules cannot read
            payloads.append(({"skill_id": "", "success": True}, record.stamp_ns))
    return payloads


def _values(aggregates) -> tuple[list, list]:
    parameters, observations = [], []
    for batch in aggregates.values:
        parameters += batch.parameters
        observations += batch.observations
    return sorted(parameters), sorted(observations)


def test_one_result_reads_as_a_range_of_one_reads_from_the_store(tmp_path):
    store = MemoryStore(f"sqlite:///{tmp_path / 'm.db'}")
    part = store.partition(IDENT)
    for payload, stamp_ns in _payloads(seed=1):
        part.append(EXECUTION_RESULT, payload, stamp_ns)
    events = list(part.events([EXECUTION_RESULT]))
    assert any(not event.payload.get("skill_id") for event in events)
    for event in events:
        with store.read() as conn:
            stored = part.result_aggregates(event.seq - 1, event.seq, BUCKET_NS, conn)
            (row,) = list(stored.outcomes)
            stored_values = _values(stored)
        one = one_result_aggregates(event.payload, event.stamp_ns, event.id, BUCKET_NS)
        (one_row,) = one.outcomes
        assert one_row == row._replace(min_seq=0), event.payload
        assert _values(one) == stored_values, event.payload
    store.close()

"""The logger's CPU per result without DDS or competition: where its time goes.

Measured in this process, on a fresh SQLite store, in the batches the logger writes at
1000 results/s (one per intake round, `intake_period_s` 0.4: 400 results):
- intake: what the intake thread does with a result once rclpy has handed it the bytes,
  as EpisodicLogger.take_arrived does it without the node: read the fields from
  the CDR, validate, queue the round (Ingest.take_received, Ingest.submit_events);
- writer: the Ingest writer thread appending those batches (this process's CPU while
  the intake thread only waits for the flush);
- store rows only: the same rows (events, result_facets, result_values, the chain head,
  the rollups) inserted again into another fresh store, by plain executemany from lists
  made beforehand, in the same batches: the database's share of the writer, no Python
  per result.
bench.ingest adds the DDS threads' CPU it measures live, for the logger's budget at
1000/s: what any logger that keeps this store can spend at the least, and what this one
spends with nothing competing.

    python -m bench.ingest_cost [--results 20000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from rclpy.serialization import serialize_message
from sqlalchemy import text

from bench.load_publisher import result_message
from bench.stores import IDENTITY, KeySpace
from robot_memory.intake.ingest import Ingest
from robot_memory.operation.parameters import node_defaults
from robot_memory.ros.conversions import serialized_result_fields
from robot_memory.store import MemoryStore
from robot_memory.store.bulk import insert_rows
from robot_memory.store.facets import _FACET_COLUMNS, _VALUE_COLUMNS, roll_up_blocks
from robot_memory.store.log import _EVENT_COLUMNS
from robot_memory.store.schema import events, result_facets, result_values

# Results per intake round at 1000/s, with the logger's default intake period.
BATCH = round(1000 * node_defaults("episodic_logger")["intake_period_s"])
TOPIC = "execution_results"
# The tables the writer appends to, with the columns it writes (in its order).
_TABLES = {"events": (events, _EVENT_COLUMNS), "result_facets": (result_facets, _FACET_COLUMNS),
           "result_values": (result_values, _VALUE_COLUMNS)}


def serialized_results(count: int) -> list[bytes]:
    """What the logger takes from its reader: results of the ingest benchmark's shape."""
    keys = KeySpace.for_facts(1000)
    return [serialize_message(result_message(i, keys)) for i in range(count)]


def intake_and_writer(results: list[bytes], url: str) -> tuple[float, float]:
    """(intake, writer) CPU seconds for these results, in rounds of BATCH."""
    store = MemoryStore(url)
    ingest = Ingest(store.partition(IDENTITY), flush_period_s=10.0)
    intake_s = 0.0
    cpu_started = time.process_time()
    for first in range(0, len(results), BATCH):
        started = time.thread_time()
        received_ns = time.time_ns()  # the round's start, as the logger's intake takes it
        ingest.submit_events([ingest.take_received(serialized_result_fields, data, TOPIC,
                                                   received_ns)
                              for data in results[first:first + BATCH]])
        intake_s += time.thread_time() - started
        if not ingest.flush(timeout=60.0):
            raise RuntimeError(f"the writer did not write: {ingest.last_error}")
    total_s = time.process_time() - cpu_started
    assert ingest.written == len(results) and not ingest.rejected, ingest.rejected
    ingest.close()
    store.close()
    return intake_s, total_s - intake_s


def written_rows(url: str) -> dict[str, list[tuple]]:
    """The rows the writer appended, by table, in append order."""
    store = MemoryStore(url)
    with store.read() as conn:
        rows = {table: conn.execute(text(
                    f"SELECT {', '.join(columns)} FROM {table} "
                    # result_values is kept in its key's order (no rowid)
                    f"ORDER BY {'event_id, source, name' if table == 'result_values' else 'seq'}"
                    )).all()
                for table, (_, columns) in _TABLES.items()}
        combos = conn.execute(text("SELECT * FROM result_combos ORDER BY combo_id")).all()
    store.close()
    return {**rows, "result_combos": combos}


def row_counts(url: str) -> dict[str, int]:
    store = MemoryStore(url)
    with store.read() as conn:
        counts = {table: conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
                  for table in (*_TABLES, "result_rollup", "value_rollup")}
    store.close()
    return counts


def rows_only(rows: dict[str, list[tuple]], url: str) -> float:
    """CPU seconds to insert these rows again, batch by batch, with the chain head, the
    rollups and a commit per batch as the writer does, and no Python per row."""
    store = MemoryStore(url)
    events, facets = rows["events"], rows["result_facets"]
    assert len(events) == len(facets)  # execution results only
    values_by_event: dict[int, list[tuple]] = {}
    for row in rows["result_values"]:
        values_by_event.setdefault(row[0], []).append(tuple(row))
    batches = []
    for first in range(0, len(events), BATCH):
        batch_facets = [tuple(row) for row in facets[first:first + BATCH]]
        batches.append(([tuple(row) for row in events[first:first + BATCH]], batch_facets,
                        [v for f in batch_facets for v in values_by_event.get(f[0], [])],
                        events[min(first + BATCH, len(events)) - 1]))
    block = store.rollup.block
    with store.write() as conn:  # the combinations first, as the first results made them
        conn.exec_driver_sql(f"INSERT INTO result_combos VALUES "
                             f"({', '.join('?' * len(rows['result_combos'][0]))})",
                             [tuple(row) for row in rows["result_combos"]])
        conn.exec_driver_sql("INSERT INTO chain_heads (identity_hash, seq, event_hash) "
                             "VALUES (?, 0, ?)", (IDENTITY, "0" * 64))
        conn.exec_driver_sql("INSERT INTO chains (chain_id, identity_hash) VALUES (?, ?)",
                             (facets[0][1], IDENTITY))  # the chain number the rows carry
    conn = store.write_connection()
    started = time.process_time()
    for batch_events, batch_facets, batch_values, last in batches:
        with conn.begin():
            chain = conn.exec_driver_sql(
                "SELECT seq, event_hash, (SELECT chain_id FROM chains WHERE identity_hash = ?) "
                "FROM chain_heads WHERE identity_hash = ?", (IDENTITY, IDENTITY)).first()[2]
            for name, batch in (("events", batch_events), ("result_facets", batch_facets),
                                ("result_values", batch_values)):
                insert_rows(conn, *_TABLES[name], batch)
            conn.exec_driver_sql("UPDATE chain_heads SET seq = ?, event_hash = ? "
                                 "WHERE identity_hash = ?", (last[1], last[6].hex(), IDENTITY))
            roll_up_blocks(conn, chain, store.rollup, (batch_events[0][1] - 1) // block,
                           last[1] // block)
    seconds = time.process_time() - started
    conn.close()
    store.close()
    return seconds


def measure(count: int = 20_000) -> dict:
    """µs of CPU per result: intake, writer, and the store's rows alone."""
    results = serialized_results(count)
    with tempfile.TemporaryDirectory(prefix="bench_ingest_cost_") as scratch:
        logged = f"sqlite:///{Path(scratch) / 'logged.db'}"
        intake_s, writer_s = intake_and_writer(results, logged)
        replayed = f"sqlite:///{Path(scratch) / 'rows.db'}"
        replay_s = rows_only(written_rows(logged), replayed)
        # The same rows, rollups included: the replay did the writer's database work.
        assert row_counts(replayed) == row_counts(logged), (row_counts(replayed),
                                                            row_counts(logged))
    per = 1e6 / count
    return {"results": count, "batch": BATCH, "intake_us_per_result": round(intake_s * per, 1),
            "writer_us_per_result": round(writer_s * per, 1),
            "store_rows_only_us_per_result": round(replay_s * per, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=int, default=20_000)
    print(json.dumps(measure(parser.parse_args().results), indent=2))


if __name__ == "__main__":
    main()

"""The intent index (`intent_events`, schema 7): which events of a chain carry a planner
intent, so that the lineage of an action (the consultations made for it, its results)
is read by key, not by scanning the log.

An execution result or a grounding consultation whose payload names a non-empty
`intent_id` gets one row, written by the append that stores the event (in its
transaction) or back-filled by the schema-7 migration. The payload alone is hashed:
these rows are an index, not history.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, select

from robot_memory.event_kinds import EXECUTION_RESULT, FACT_CONSULTATION
from robot_memory.store.bulk import insert_rows, placeholder
from robot_memory.store.schema import INTENT_MAX_LENGTH, events, intent_events

# The kinds whose payload's intent_id is indexed.
INTENT_KINDS = (EXECUTION_RESULT, FACT_CONSULTATION)
_COLUMNS = ("chain_id", "intent_id", "seq", "event_id")
# Back-fill: events read per statement.
BACKFILL_BATCH = 20_000


def intent_of(kind: str, payload: dict[str, Any]) -> str | None:
    """The intent an event of this kind and payload is indexed under, or None. Only a
    text the column holds whole: every path in holds intents to that limit already, so
    a longer one is a row written by hand, left out rather than clipped."""
    if kind not in INTENT_KINDS:
        return None
    intent = payload.get("intent_id")
    if type(intent) is not str or not intent or len(intent) > INTENT_MAX_LENGTH:
        return None
    return intent


def index_intents(conn: Connection, chain: int, rows: list[tuple[str, int, int]]) -> None:
    """Index (intent_id, seq, event_id) rows of one chain, in the appending transaction."""
    insert_rows(conn, intent_events, _COLUMNS,
                [(chain, intent, seq, event_id) for intent, seq, event_id in rows])


def backfill_intents(conn: Connection, identity_hash: str, chain: int) -> int:
    """Index the intents of one identity's stored events (the schema-7 migration);
    returns how many rows it wrote."""
    written, cursor = 0, 0
    while True:
        batch = conn.execute(select(events.c.id, events.c.seq, events.c.kind,
                                    events.c.payload_json)
                             .where(events.c.identity_hash == identity_hash,
                                    events.c.seq > cursor, events.c.kind.in_(INTENT_KINDS))
                             .order_by(events.c.seq).limit(BACKFILL_BATCH)).all()
        rows = []
        for event_id, seq, kind, payload_json in batch:
            try:
                payload = json.loads(payload_json)
            except ValueError:  # a damaged row: verification names it, the index skips it
                continue
            intent = intent_of(kind, payload) if isinstance(payload, dict) else None
            if intent is not None:
                rows.append((intent, seq, event_id))
        index_intents(conn, chain, rows)
        written += len(rows)
        if len(batch) < BACKFILL_BATCH:
            return written
        cursor = batch[-1][1]


class IntentIndex:
    """Partition methods (store/partition.py) that read the intent index of its chain."""

    def intent_event_rows(self, intent_id: str, conn: Connection, newest: int | None = None
                          ) -> list[tuple[int, int, str, int, str]]:
        """(event id, seq, kind, stamp_ns, payload as stored) of the live events of this
        identity that carry `intent_id` (the `newest` of them, when given), in chain
        order: one range of the index's key, read from its end, joined to the events by
        id."""
        chain = self.chain_number(conn)
        if not chain or not intent_id:
            return []
        mark = placeholder(conn)
        limit = f" LIMIT {int(newest)}" if newest is not None else ""
        rows = [tuple(row) for row in conn.exec_driver_sql(
            "SELECT e.id, e.seq, e.kind, e.stamp_ns, e.payload_json FROM intent_events i "
            f"JOIN events e ON e.id = i.event_id WHERE i.chain_id = {mark} AND "
            f"i.intent_id = {mark} ORDER BY i.seq DESC{limit}", (chain, intent_id)).all()]
        rows.reverse()
        return rows

    def intent_event_count(self, intent_id: str, conn: Connection) -> int:
        """How many live events of this identity carry `intent_id` (the index alone)."""
        chain = self.chain_number(conn)
        if not chain or not intent_id:
            return 0
        mark = placeholder(conn)
        return conn.exec_driver_sql(
            f"SELECT count(*) FROM intent_events WHERE chain_id = {mark} AND "
            f"intent_id = {mark}", (chain, intent_id)).scalar()

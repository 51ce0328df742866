"""The acknowledged requests of one identity (`request_ids`, schema 6): which event each
request id's first commit stored, so that a retry is answered from it instead of being
stored again, also after the logger restarts.

Read and written inside the writer's own transaction, the one that appends the events:
an id is recorded exactly when its event is committed. On PostgreSQL the lookup first
locks the identity's chain head (as the append would), so two writers of one identity
look up and record their ids one after the other, and the second finds the first's."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import Connection, select

from robot_memory.store.bulk import insert_rows, placeholder
from robot_memory.store.schema import request_ids

_COLUMNS = ("identity_hash", "request_id", "event_id", "seq", "result_digest")


class RecordedRequest(NamedTuple):
    """The event a request id's first commit stored, and the digest of its result."""

    event_id: int
    seq: int
    result_digest: str  # 64 hex digits


class AcknowledgedRequests:
    """Partition methods (store/partition.py) for the request ids of its identity. The
    writer's two calls are plain driver statements, like the append's (store/bulk.py):
    SQLAlchemy's statement building would cost more than the rows."""

    identity_hash: str

    def recorded_requests_in(self, conn: Connection,
                             ids: list[str]) -> dict[str, RecordedRequest]:
        """The requests among `ids` recorded already (id -> RecordedRequest)."""
        mark = placeholder(conn)
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT seq FROM chain_heads WHERE identity_hash = {mark} "
                                 "FOR UPDATE", (self.identity_hash,))
        rows = conn.exec_driver_sql(
            f"SELECT request_id, event_id, seq, result_digest FROM request_ids WHERE "
            f"identity_hash = {mark} AND request_id IN ({', '.join([mark] * len(ids))})",
            (self.identity_hash, *ids))
        return {row[0]: RecordedRequest(row[1], row[2], bytes(row[3]).hex()) for row in rows}

    def record_requests_in(self, conn: Connection,
                           recorded: dict[str, RecordedRequest]) -> None:
        """Record the requests whose events this transaction appended."""
        insert_rows(conn, request_ids, _COLUMNS, [
            (self.identity_hash, request_id, event_id, seq, bytes.fromhex(digest))
            for request_id, (event_id, seq, digest) in recorded.items()])

    def recorded_request(self, request_id: str) -> RecordedRequest | None:
        """One request id's record (None when it has none: never seen, or compacted)."""
        with self.store.read() as conn:
            row = conn.execute(select(request_ids.c.event_id, request_ids.c.seq,
                                      request_ids.c.result_digest).where(
                request_ids.c.identity_hash == self.identity_hash,
                request_ids.c.request_id == request_id)).first()
        return None if row is None else RecordedRequest(*row)

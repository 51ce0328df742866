"""The acknowledged requests of one identity (`request_ids`, schema 6): which event each
request id's first commit stored, so that a retry is answered from it instead of being
stored again, also after the logger restarts.

Read and written inside the writer's own transaction, the one that appends the events:
an id is recorded exactly when its event is committed. On PostgreSQL the lookup first
locks the identity's chain head (as the append would), so two writers of one identity
look up and record their ids one after the other, and the second finds the first's."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import Connection, insert, select

from robot_memory.store.schema import chain_heads, request_ids


class RecordedRequest(NamedTuple):
    """The event a request id's first commit stored, and the digest of its result."""

    event_id: int
    seq: int
    result_digest: str  # 64 hex digits


class AcknowledgedRequests:
    """Partition methods (store/partition.py) for the request ids of its identity."""

    identity_hash: str

    def recorded_requests_in(self, conn: Connection,
                             ids: list[str]) -> dict[str, RecordedRequest]:
        """The requests among `ids` recorded already (id -> RecordedRequest)."""
        if conn.dialect.name == "postgresql":
            conn.execute(select(chain_heads.c.seq).where(
                chain_heads.c.identity_hash == self.identity_hash).with_for_update())
        rows = conn.execute(select(request_ids.c.request_id, request_ids.c.event_id,
                                   request_ids.c.seq, request_ids.c.result_digest).where(
            request_ids.c.identity_hash == self.identity_hash,
            request_ids.c.request_id.in_(ids)))
        return {row[0]: RecordedRequest(*row[1:]) for row in rows}

    def record_requests_in(self, conn: Connection,
                           recorded: dict[str, RecordedRequest]) -> None:
        """Record the requests whose events this transaction appended."""
        if recorded:
            conn.execute(insert(request_ids), [
                {"identity_hash": self.identity_hash, "request_id": request_id,
                 "event_id": event_id, "seq": seq, "result_digest": digest}
                for request_id, (event_id, seq, digest) in recorded.items()])

    def recorded_request(self, request_id: str) -> RecordedRequest | None:
        """One request id's record (None when it has none: never seen, or compacted)."""
        with self.store.read() as conn:
            row = conn.execute(select(request_ids.c.event_id, request_ids.c.seq,
                                      request_ids.c.result_digest).where(
                request_ids.c.identity_hash == self.identity_hash,
                request_ids.c.request_id == request_id)).first()
        return None if row is None else RecordedRequest(*row)

"""Sealed segments kept in a fleet store (schema 7): the rows a robot's upload adds to
`fleet_segments` and `fleet_segment_chunks`, and reading them back.

An upload is one transaction: its row, its chunks, then the SHA-256 of the chunks as
the database itself computes it, which must equal the one the robot's chain recorded,
or the transaction is rolled back. A lost connection leaves nothing. Readers never take
a row's word for it either: `confirmed_upload` re-computes the hash of what is stored
(PostgreSQL's sha256(); in Python on SQLite), and `read_upload` checks the bytes it
returns. Row-level security (store/roles.py) limits a robot's role to its own rows.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from sqlalchemy import Connection, insert, select, text

from robot_memory.errors import StoreFailure
from robot_memory.store.schema import fleet_segment_chunks, fleet_segments


class UploadMismatch(StoreFailure):
    """The bytes a transaction stored do not hash to the SHA-256 they were sent under."""


@dataclass(frozen=True)
class Upload:
    """One stored upload of a segment whose bytes hash to `sha256` (checked)."""

    upload_id: str
    segment: str
    sha256: str
    size_bytes: int
    shipped_at_ns: int


def stored_sha256(conn: Connection, upload_id: str) -> tuple[str, int]:
    """(SHA-256 hex, size) of the chunks stored under `upload_id`, computed by the
    database on PostgreSQL."""
    if conn.dialect.name == "postgresql":
        row = conn.execute(text(
            "SELECT encode(sha256(coalesce(string_agg(data, ''::bytea ORDER BY chunk_no), "
            "''::bytea)), 'hex'), coalesce(sum(length(data)), 0) "
            "FROM fleet_segment_chunks WHERE upload_id = :u"), {"u": upload_id}).one()
        return row[0], int(row[1])
    digest, size = hashlib.sha256(), 0
    for chunk in _chunks(conn, upload_id):
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


def insert_upload(conn: Connection, identity_hash: str, segment: str, sha256: str,
                  chunks: Iterable[bytes], shipped_at_ns: int) -> Upload:
    """Add one upload in the caller's transaction; UploadMismatch (the caller rolls back)
    when what was stored does not hash to `sha256` or the chunk count is not the row's."""
    upload_id = uuid.uuid4().hex
    count, size = 0, 0
    for number, data in enumerate(chunks):
        conn.execute(insert(fleet_segment_chunks).values(
            upload_id=upload_id, identity_hash=identity_hash, chunk_no=number, data=data))
        count, size = number + 1, size + len(data)
    conn.execute(insert(fleet_segments).values(
        upload_id=upload_id, identity_hash=identity_hash, segment=segment, sha256=sha256,
        size_bytes=size, chunks=count, shipped_at_ns=shipped_at_ns))
    stored, stored_size = stored_sha256(conn, upload_id)
    if (stored, stored_size) != (sha256, size):
        raise UploadMismatch(f"segment {segment}: the fleet store holds {stored_size} bytes "
                             f"hashing to {stored[:12]}, not {size} bytes hashing to "
                             f"{sha256[:12]}")
    return Upload(upload_id, segment, sha256, size, shipped_at_ns)


def confirmed_upload(conn: Connection, identity_hash: str, segment: str,
                     sha256: str) -> Upload | None:
    """An upload of this segment whose stored bytes re-hash to `sha256` and add up to its
    recorded size (None: none does; a partial or damaged one is passed over)."""
    rows = conn.execute(select(fleet_segments.c.upload_id, fleet_segments.c.size_bytes,
                               fleet_segments.c.shipped_at_ns).where(
        fleet_segments.c.identity_hash == identity_hash, fleet_segments.c.segment == segment,
        fleet_segments.c.sha256 == sha256).order_by(fleet_segments.c.shipped_at_ns)).all()
    for upload_id, size, shipped_at in rows:
        if stored_sha256(conn, upload_id) == (sha256, size):
            return Upload(upload_id, segment, sha256, size, shipped_at)
    return None


def read_upload(conn: Connection, upload_id: str) -> Iterator[bytes]:
    """The chunks of one upload, in order (the caller hashes what it writes)."""
    yield from _chunks(conn, upload_id)


def _chunks(conn: Connection, upload_id: str) -> Iterator[bytes]:
    last = -1
    while True:  # one chunk per statement: a segment is never held whole in memory
        row = conn.execute(select(fleet_segment_chunks.c.chunk_no, fleet_segment_chunks.c.data)
                           .where(fleet_segment_chunks.c.upload_id == upload_id,
                                  fleet_segment_chunks.c.chunk_no > last)
                           .order_by(fleet_segment_chunks.c.chunk_no).limit(1)).first()
        if row is None:
            return
        last = row[0]
        yield bytes(row[1])


__all__ = ["Upload", "UploadMismatch", "confirmed_upload", "insert_upload", "read_upload",
           "stored_sha256"]

"""Acknowledged writes with a request id: exactly once for what was acknowledged.

A producer that retries `record_event` after a lost reply sends the same result again.
With a request id, the retry is answered with the event the first commit stored (its
id and seq, `Replayed`) and nothing is stored again; the same id with a different
result is refused (`RequestIdReused`, counted as request_id_reused): an id names one
result, and answering another with the first's event would acknowledge a result the log
does not hold. The ids are kept in the store (store/requests.py), so this holds across a
restart of the logger, for as long as the event is live (a compaction that removes the
event removes its id). An empty id asks for no idempotence: every call stores.

An id is at most REQUEST_ID_MAX_LENGTH characters of letters, digits and `. _ : / -`
(a UUID, `grasp/attempt-42`), and passes the privacy boundary like every text kept.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from robot_memory.errors import InputError
from robot_memory.intake.privacy import find_sensitive
from robot_memory.intake.records import InvalidRecord, privacy_refusal
from robot_memory.store import NewEvent
from robot_memory.store.schema import REQUEST_ID_MAX_LENGTH

FIELD = "request_id"
INVALID_REQUEST_ID = "invalid_request_id"  # the count key of a malformed id
REQUEST_ID_REUSED = "request_id_reused"  # RecordEvent's reason code, and the count key
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:/-]+")


class AcknowledgedWrite(NamedTuple):
    """A result admitted for `record_event`: its event, and its request id ("" for none)
    with the digest of the result as the request gave it."""

    event: NewEvent
    request_id: str = ""
    result_digest: str = ""


@dataclass(frozen=True, slots=True)
class Replayed:
    """The answer to a retry: the event its request id's first commit stored."""

    id: int
    seq: int


class RequestIdReused(InputError):
    """The request id names an earlier, different result; nothing was stored."""


def request_id_problem(request_id: str) -> InvalidRecord | None:
    """Why a request id cannot be kept (too long, characters outside the set, or it
    looks like a secret or personal data), or None."""
    if len(request_id) > REQUEST_ID_MAX_LENGTH:
        return InvalidRecord(FIELD, INVALID_REQUEST_ID, f"{len(request_id)} characters, "
                             f"more than {REQUEST_ID_MAX_LENGTH}")
    if _REQUEST_ID.fullmatch(request_id) is None:
        return InvalidRecord(FIELD, INVALID_REQUEST_ID,
                             "only letters, digits and . _ : / - are allowed")
    finding = find_sensitive({FIELD: request_id})
    return None if finding is None else privacy_refusal(finding)


def result_digest(fields: dict[str, Any]) -> str:
    """SHA-256 of a result's fields as the request gave them (before the receiver's
    clock is applied, so a retry of the same result gives the same digest)."""
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def reused(request_id: str) -> RequestIdReused:
    return RequestIdReused(f"{FIELD}: {request_id!r} was acknowledged for a different "
                           "result; nothing stored (use a new id for a new result)")

"""Off-the-request-path audit writer for grounding consultations.

The service callback only enqueues; a background thread appends the records in
batches. The queue is bounded: an overflow is counted (and reported by the node),
never silent. `close()` writes whatever is still queued.

The privacy boundary covers these records too: before a batch is written, the texts a
request gave that a record keeps of who asked and why (`requester`, `intent_id`) pass
the detector that screens execution results. A flagged text is replaced in the record by
its category (`[refused: privacy_email]`), a `privacy_rejection` event (source `ground`,
the field, the category) is written beside it, and it is counted in `redacted`. The
answer itself was served: screening here, on the writer's thread, keeps the detector's
cost (tens of microseconds for a text it has not seen, such as a fresh UUID) off the
request path, and a planner is not refused its answer for how it names itself.
"""

from __future__ import annotations

import math
import queue
import threading
from typing import Any

from collections import Counter

from robot_memory.grounding import priors
from robot_memory.grounding.analogies import audit_entries
from robot_memory.event_kinds import FACT_CONSULTATION, PRIVACY_REJECTION
from robot_memory.grounding.limits import GROUND, clipped
from robot_memory.grounding.request import GroundingAnswer
from robot_memory.intake.privacy import find_sensitive
from robot_memory.store import NewEvent, Partition

# The texts of a consultation record that the request gave as it liked (the query's
# names are plain names, checked by grounding_request.validate_request).
SCREENED_FIELDS = ("requester", "intent_id")


def audited_number(value: float) -> float | str:
    """A number a request gave, as the audit can keep it: NaN and infinities (refused
    as INVALID_REQUEST, still audited) as text, since the log's canonical JSON has no
    place for them and a record it cannot encode would block the writer's batch."""
    return value if math.isfinite(value) else repr(value)


def consultation_payload(consultation_id: str, requester: str, intent_id: str,
                         query: dict[str, Any], answer: GroundingAnswer) -> dict[str, Any]:
    """The fact_consultation record of one answer: who asked what, and what was served.
    The robot's own facts are listed in `facts`; facts lent by analogy only under
    `analogies` (with the known target, distance and properties compared), so no reader
    of the log can take them for knowledge of the asked target; fleet priors only under
    `priors` (whose facts, with their counts, and the blend served). A record without
    analogies or priors is what it was before they existed."""
    payload = {"consultation_id": consultation_id, "requester": requester,
               "intent_id": intent_id, "status": answer.status,
               "reason_code": answer.reason_code, "query": query,
               "facts": [{"fact_id": f.id, "kind": f.kind, "key": f.key,
                          "rule_version": f.rule_version} for f in answer.facts]}
    if answer.analogies:
        payload["analogies"] = audit_entries(answer.analogies)
    if answer.priors:
        payload["priors"] = priors.audit_entries(answer.priors)
    return payload


def consultation_query(request: Any, refused_unread: bool = False) -> dict[str, Any]:
    """What a consultation record keeps of the question: `request` has GroundingQuery's
    request fields, read by name. A request refused unread (a field over its limit,
    limits.GROUND) is kept with each text clipped to its length when too long and its
    lists empty. Analogy and priors fields appear only when the request allows them, so
    the records of requests without them stay as they were."""
    text = _clipped_text if refused_unread else getattr
    query = {"skill_id": text(request, "skill_id"),
             "target_class": text(request, "target_class"),
             "environment": text(request, "environment"),
             "fact_kinds": [] if refused_unread else list(request.fact_kinds)}
    if request.allow_analogies:
        query.update(allow_analogies=True, max_analogies=request.max_analogies,
                     target_properties=[] if refused_unread else [
                         [kv.key, audited_number(kv.value)]
                         for kv in request.target_properties])
    if request.allow_priors:
        query["allow_priors"] = True
    return query


def consultation_event(request: Any, answer: GroundingAnswer, consultation_id: str,
                       stamp_ns: int, refused_unread: bool = False) -> NewEvent:
    """The fact_consultation event of one audited answer to `request` (GroundingQuery's
    request fields, read by name): who asked (requester, intent_id, clipped as the query
    is when the request was refused unread), what (consultation_query) and what was
    served (consultation_payload). The AuditWriter screens who asked before writing."""
    text = _clipped_text if refused_unread else getattr
    return NewEvent(FACT_CONSULTATION, consultation_payload(
        consultation_id, text(request, "requester"), text(request, "intent_id"),
        consultation_query(request, refused_unread), answer), stamp_ns)


def _clipped_text(request: Any, name: str) -> str:
    return clipped(getattr(request, name), GROUND[name])


def redacted(category: str) -> str:
    """What a record keeps of a text refused at the privacy boundary: its category."""
    return f"[refused: privacy_{category}]"


def screened(events: list[NewEvent], redactions: Counter[str]) -> list[NewEvent]:
    """The batch with each consultation's requester and intent id screened: a flagged
    one redacted, a privacy_rejection event after its record, counted by category."""
    out = []
    for event in events:
        out.append(event)
        if event.kind != FACT_CONSULTATION:
            continue
        payload = event.payload
        for name in SCREENED_FIELDS:
            finding = find_sensitive({name: payload.get(name)})
            if finding is not None:
                payload[name] = redacted(finding.category)
                redactions[finding.category] += 1
                out.append(NewEvent(PRIVACY_REJECTION, {"source": "ground", "field": name,
                                                        "category": finding.category},
                                    event.stamp_ns))
    return out


class AuditWriter:
    """Writes consultation events for the grounding server on its own thread, in batches
    every `flush_period_s`. `submit` never blocks or raises; a failed write keeps the
    batch and retries (the error in `last_error`); overflow is counted in `overflowed`."""

    def __init__(self, partition: Partition, max_queue: int = 10000, flush_period_s: float = 0.2):
        self._partition = partition
        self._queue: queue.Queue[NewEvent] = queue.Queue(maxsize=max_queue)
        self._period = flush_period_s
        self._stop = threading.Event()
        self.written = 0
        self.overflowed = 0
        self.redacted: Counter[str] = Counter()  # requester or intent ids, by category
        self.last_error = ""
        self._thread = threading.Thread(target=self._run, name="audit-writer", daemon=True)
        self._thread.start()

    def submit(self, event: NewEvent) -> bool:
        """Queue one record; False (and counted) when the queue is full."""
        try:
            self._queue.put_nowait(event)
            return True
        except queue.Full:
            self.overflowed += 1
            return False

    @property
    def depth(self) -> int:
        """Records waiting to be written."""
        return self._queue.qsize()

    def _drain(self) -> list[NewEvent]:
        batch = []
        while True:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                return screened(batch, self.redacted)

    def _write(self, batch: list[NewEvent]) -> bool:
        try:
            self._partition.append_many(batch)
        except Exception as exc:  # keep the batch; the caller retries
            self.last_error = str(exc)
            return False
        self.written += len(batch)
        self.last_error = ""
        return True

    def _run(self) -> None:
        carry: list[NewEvent] = []
        while not self._stop.wait(self._period):
            carry += self._drain()
            if carry and self._write(carry):
                carry = []
        self._final = carry

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread (waiting up to `timeout` s) and write what is still queued;
        a final write that fails is lost and left in `last_error`."""
        self._stop.set()
        self._thread.join(timeout)
        batch = getattr(self, "_final", []) + self._drain()
        if batch:
            self._write(batch)

"""The one admission of an execution result, whichever way it came in.

The logger's topics and its `record_event` service (through `ingest.Ingest`),
`robot-memory ingest` (a JSON line) and `import-bag` (a bag message) each have a reader
that turns what they received into a result's fields (and `record_event` a request id,
checked by `check_request_id`). `Admission.admit` does the rest for all of them: it
reads, validates (`records.validated_payload`, the privacy boundary included), applies
the receiver's clock (`receipt`) and gives either the event to append or a `Refused`
saying why not. Every refusal is counted by reason here; a privacy
refusal carries the `privacy_rejection` event to append in the result's place (the field
and the category, never the value). So one bad result refuses that result alone, with
the same reason on every path, and never costs the results around it: `admit` does not
raise for anything it is given.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from robot_memory.errors import InputError
from robot_memory.event_kinds import EXECUTION_RESULT, PRIVACY_REJECTION
from robot_memory.intake.receipt import DEFAULT_MAX_CLOCK_AHEAD_S, at_receipt, seconds_to_ns
from robot_memory.intake.records import InvalidRecord, validated_payload
from robot_memory.intake.requests import request_id_problem
from robot_memory.store import NewEvent

# Why a result was not taken (RecordEvent's reason codes use the same words).
INVALID, PRIVACY, STORE_FULL, STORE_ERROR = "invalid", "privacy", "store_full", "store_error"
PRIVACY_PREFIX = "privacy_"

Read = Callable[[Any], dict[str, Any]]  # what was received -> the result's fields


class Receipt(Protocol):
    """More of how a result was received, recorded in its payload beside its fields
    (ros/redelivery.py's SampleId: the DDS sample it came in)."""

    def record_in(self, payload: dict[str, Any]) -> None: ...


class Refused(InputError):
    """A result not admitted: `code` says which kind (INVALID, PRIVACY, STORE_FULL),
    `reason` is the count key, `detail` names the field ("skill_id: ..."); `event` is the
    privacy_rejection to append for a privacy refusal (None otherwise).

    Returned, never raised by `admit`: an exception that is kept after being raised holds
    its traceback's frames, and through them whatever was received, until the cyclic
    collector runs (rarely, in the nodes: ros/spin.py)."""

    def __init__(self, code: str, reason: str, detail: str, event: NewEvent | None = None):
        super().__init__(detail)
        self.code, self.reason, self.detail, self.event = code, reason, detail, event


def malformed(exc: Exception) -> InvalidRecord:
    """The refusal of what a reader (or a library under it) could not read at all."""
    return InvalidRecord("message", "malformed", f"cannot be read ({exc!r})")


class Admission:
    """Admits results for one receiver: counts refusals by reason in `rejected` and the
    results stored at their receipt time in `clock_skew`. `lock` guards the counts when
    several threads admit (the logger's intake thread and its service); `now_ns` stamps
    a privacy_rejection when the receipt time is unknown (0)."""

    def __init__(self, *, max_clock_ahead_s: float = DEFAULT_MAX_CLOCK_AHEAD_S,
                 now_ns: Callable[[], int] = time.time_ns,
                 rejected: Counter[str] | None = None, lock=None):
        self.max_ahead_ns = seconds_to_ns(max_clock_ahead_s)
        self.rejected: Counter[str] = Counter() if rejected is None else rejected
        self.clock_skew = 0
        self._now_ns = now_ns
        self._lock = threading.Lock() if lock is None else lock

    def admit(self, read: Read, given: Any, source: str, received_ns: int,
              receipt: Receipt | None = None) -> NewEvent | Refused:
        """The event of the result `given`, whose fields are read(given), received at
        `received_ns` from `source`, or the Refused saying why not (counted).

        The receipt time applies as `receipt.at_receipt` says (recorded in the payload; it
        replaces a stamp of 0, and one too far ahead of it, counted in clock_skew).
        `receipt`, when given, records more of how the result came in (the DDS sample).
        The dict read() returns is given away: on the fast path it becomes the payload."""
        try:
            stamp_ns, payload = validated_payload(read(given))
        except InvalidRecord as exc:
            return self.refuse_invalid(exc, source, received_ns)
        except Exception as exc:  # a reader's bug or a library's surprise: this one only
            return self.refuse_invalid(malformed(exc), source, received_ns)
        stamp_ns, skewed = at_receipt(payload, stamp_ns, received_ns, self.max_ahead_ns)
        if skewed:
            with self._lock:
                self.clock_skew += 1
        if receipt is not None:
            receipt.record_in(payload)
        return NewEvent(EXECUTION_RESULT, payload, stamp_ns, as_decoded=True,
                        checked_result=True)

    def check_request_id(self, request_id: str, source: str,
                         received_ns: int = 0) -> Refused | None:
        """None for a request id that may be kept (intake/requests.py), else its
        Refused, counted (a privacy refusal with its privacy_rejection event)."""
        problem = request_id_problem(request_id)
        return None if problem is None else self.refuse_invalid(problem, source, received_ns)

    def refuse_invalid(self, exc: InvalidRecord, source: str, received_ns: int = 0) -> Refused:
        """Count a result found invalid; a privacy refusal carries its privacy_rejection
        event, stamped at the receipt time."""
        detail = f"{exc.field}: {exc.detail}"
        if not exc.reason.startswith(PRIVACY_PREFIX):
            return self.refuse(INVALID, exc.reason, detail)
        event = NewEvent(PRIVACY_REJECTION,
                         {"source": source, "field": exc.field,
                          "category": exc.reason[len(PRIVACY_PREFIX):]},
                         received_ns if received_ns > 0 else self._now_ns())
        return self.refuse(PRIVACY, exc.reason, detail, event)

    def refuse(self, code: str, reason: str, detail: str,
               event: NewEvent | None = None) -> Refused:
        """Count and return a refusal (also for a receiver's own reasons: store_full)."""
        self.count(reason)
        return Refused(code, reason, detail, event)

    def count(self, reason: str, n: int = 1) -> None:
        with self._lock:
            self.rejected[reason] += n


__all__ = ["INVALID", "PRIVACY", "PRIVACY_PREFIX", "STORE_ERROR", "STORE_FULL", "Admission",
           "Receipt", "Refused", "malformed"]

"""Intake of execution results: validate cheaply, queue, append in batches.

Whoever receives results (the logger node's subscriptions and its `record_event`
service, without ROS in tests) hands them to an `Ingest`. It admits each one as every
path does (`admission`: validated, refusals counted by reason and, for the privacy
boundary, logged as a `privacy_rejection` event), puts it on one bounded FIFO queue and
returns at once. A dedicated writer thread appends what is queued in one transaction per
batch, on one long-lived store connection.

Guarantees:
- Arrival order is log order: topic results and acknowledged writes share the queue.
- An acknowledged write (`record_event`) resolves only once its transaction has committed,
  after everything that was queued before it; a failed write fails it (counted as
  store_error) and the caller is told.
- An acknowledged write with a request id is stored once (intake/requests.py): the
  writer looks the batch's ids up in the store in the transaction that appends it, so a
  retry, queued at once or after a restart, resolves to the first commit's event
  (`Replayed`, counted in `replayed`) and the same id with another result fails
  (RequestIdReused, counted as request_id_reused). Topic results take no part in it.
- A failing store keeps topic results queued, in order, and retries them; only the
  queue's bound (`max_pending`) refuses new ones, counted as backlog_full.
- Anything not stored is counted by cause in `rejected` (validation reasons,
  privacy_<category>, store_full, backlog_full, store_error, and whatever the caller
  adds with `count`, e.g. dds_lost). Nothing is dropped without a count.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from robot_memory.errors import StoreFailure
from robot_memory.retention.growth import OK as GROWTH_OK
from robot_memory.retention.growth import OVER_HARD_LIMIT, GrowthGuard
from robot_memory.intake.admission import (INVALID, PRIVACY, STORE_ERROR, STORE_FULL,
                                           Admission, Read, Receipt, Refused)
from robot_memory.intake.receipt import DEFAULT_MAX_CLOCK_AHEAD_S
from robot_memory.intake.requests import (REQUEST_ID_REUSED, AcknowledgedWrite, Replayed,
                                          RequestIdReused, result_digest, reused)
from robot_memory.store import NewEvent, Partition, StoredEvent
from robot_memory.store.requests import RecordedRequest

# Causes of loss: valid results that did not reach the log (rejections by rule are not).
LOSS_CAUSES = ("backlog_full", "dds_lost", "store_error", "unread_at_stop")

Log = Callable[[str, str], None]  # (level "warning" | "error" | "info", text)


class StoreWriteFailed(StoreFailure):
    """Set on an acknowledged write's future when the transaction holding it failed."""


@dataclass(slots=True)
class _Item:
    event: NewEvent
    seq: int  # position in arrival order
    ack: Future | None = None  # acknowledged write: resolved after the commit
    counted: bool = True  # an execution result (accepted/written count it)
    request: tuple[str, str] | None = None  # (request id, result digest): stored once


def _default_log(level: str, text: str) -> None:
    getattr(logging.getLogger("robot_memory.intake.ingest"), level)(text)


class Ingest:
    def __init__(self, partition: Partition, *, max_pending: int = 100_000,
                 flush_period_s: float = 0.05, max_batch: int = 5000,
                 retry_period_s: float = 0.5, guard: GrowthGuard | None = None,
                 size_of: Callable[[], int] | None = None, measure_period_s: float = 1.0,
                 log: Log = _default_log, now_ns: Callable[[], int] = time.time_ns,
                 max_clock_ahead_s: float = DEFAULT_MAX_CLOCK_AHEAD_S):
        self.partition = partition
        self.max_pending = max_pending
        self._period = flush_period_s
        self._max_batch = max_batch
        self._retry_period = retry_period_s
        self._guard = guard or GrowthGuard(0.0, 0.0)
        self._size_of = size_of
        self._measure_period = measure_period_s
        self._log = log
        self.accepted = 0  # valid results taken (queued)
        self.written = 0  # ... of them committed
        self.replayed = 0  # retried requests answered with their first commit's event
        self.rejected: Counter[str] = Counter()
        self.last_error = ""
        self.store_size = 0
        self.growth_state = GROWTH_OK
        self._queue: deque[_Item] = deque()
        self._cond = threading.Condition()
        # Validates, refuses and counts (into self.rejected, under self._cond). now_ns
        # stamps a privacy_rejection of a result with no receipt time (ROS time in the node).
        self._admission = Admission(max_clock_ahead_s=max_clock_ahead_s, now_ns=now_ns,
                                    rejected=self.rejected, lock=self._cond)
        self._next_seq = 0
        self._in_flight: int | None = None  # seq of the first item being written
        self._in_flight_count = 0
        self._acks_waiting = 0
        self._requests_waiting = 0  # acknowledged writes with a request id, not written
        self._flush_requested = False
        self._stopping = False
        self._conn = None
        self._measured_at = -float("inf")
        self._measure()
        self._thread = threading.Thread(target=self._run, name="ingest-writer", daemon=True)
        self._thread.start()

    # -- intake (any thread) ----------------------------------------------------------
    def take_received(self, read: Read, given: Any, source: str, received_ns: int,
                      receipt: Receipt | None = None) -> NewEvent | Refused:
        """One result `given` as a receiver got it at `received_ns`, its fields
        read(given): its event, to queue with `submit_events` or `record_event`, or the
        Refused saying why not, counted (`admission.Admission.admit`; a privacy refusal's
        privacy_rejection event is queued here). It never raises for what it is given:
        a bad sample never costs the others of its round. Past the growth guard's hard
        limit every result is refused (store_full)."""
        if self.growth_state == OVER_HARD_LIMIT:
            return self._admission.refuse(STORE_FULL, "store_full",
                                          self._guard.describe(self.store_size))
        taken = self._admission.admit(read, given, source, received_ns, receipt)
        if type(taken) is Refused and taken.event is not None:
            self._enqueue(taken.event, counted=False)
        return taken

    def take_request(self, read: Read, given: Any, source: str, received_ns: int,
                     request_id: str = "") -> AcknowledgedWrite | Refused:
        """`take_received` for an acknowledged write with an optional request id: the
        AcknowledgedWrite to hand to `record_event`, or the Refused (a malformed id or
        one that looks sensitive is refused as its result would be, counted)."""
        if not request_id:
            taken = self.take_received(read, given, source, received_ns)
            return taken if type(taken) is Refused else AcknowledgedWrite(taken)
        refused = self._admission.check_request_id(request_id, source, received_ns)
        if refused is not None:
            if refused.event is not None:
                self._enqueue(refused.event, counted=False)
            return refused
        try:
            fields = read(given)
            digest = result_digest(fields)
        except Exception:  # unreadable: the admission refuses it, with its reason
            return self.take_received(read, given, source, received_ns)
        taken = self.take_received(_as_read, fields, source, received_ns)
        return taken if type(taken) is Refused else AcknowledgedWrite(taken, request_id, digest)

    @property
    def clock_skew(self) -> int:
        """Results stamped too far ahead: stored at their receipt time."""
        return self._admission.clock_skew

    def submit_events(self, events: list[NewEvent]) -> int:
        """Queue events from a topic (`take_received` gave them), in order, under one lock
        (the intake queues a round at once); returns how many of the last ones were
        refused (counted as backlog_full) because the queue already held `max_pending`
        unwritten events."""
        with self._cond:
            room = max(0, self.max_pending - self.pending)
            refused = max(0, len(events) - room)
            if refused:
                self.rejected["backlog_full"] += refused
                events = events[:room]
            self.accepted += len(events)
            first = self._next_seq + 1
            self._queue.extend(map(_Item, events, range(first, first + len(events))))
            self._next_seq += len(events)
        return refused

    def record_event(self, write: NewEvent | AcknowledgedWrite) -> Future:
        """Queue an acknowledged write of the event `take_received` gave (or of the
        AcknowledgedWrite `take_request` gave); the future gives its StoredEvent once
        committed (after everything queued before it), `Replayed` for a retry of a request
        id committed before, or raises StoreWriteFailed, or RequestIdReused."""
        event, request_id, digest = (write if isinstance(write, AcknowledgedWrite)
                                     else (write, "", ""))
        ack: Future = Future()
        with self._cond:
            if self._stopping:
                ack.set_exception(StoreWriteFailed("the writer is closed"))
                return ack
            self.accepted += 1
            self._acks_waiting += 1
            request = (request_id, digest) if request_id else None
            self._requests_waiting += request is not None
            self._push(_Item(event, self._next_seq + 1, ack, request=request))
        return ack

    def count(self, reason: str, n: int = 1) -> None:
        """Count n results not stored, for `reason` (e.g. dds_lost, reported by DDS)."""
        self._admission.count(reason, n)

    def _enqueue(self, event: NewEvent, counted: bool) -> None:
        with self._cond:
            self._push(_Item(event, self._next_seq + 1, counted=counted))

    def _push(self, item: _Item) -> None:  # caller holds self._cond
        self._next_seq = item.seq
        self._queue.append(item)
        if item.ack is not None:
            self._cond.notify()

    # -- state ------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Events not yet written: queued, or in a transaction that has not committed."""
        return len(self._queue) + self._in_flight_count

    @property
    def lost(self) -> dict[str, int]:
        """Counts of valid results that did not reach the log, by cause."""
        return {cause: self.rejected[cause] for cause in LOSS_CAUSES if self.rejected[cause]}

    def flush(self, timeout: float = 10.0) -> bool:
        """Write at once whatever is queued now; True once it is committed (False on
        timeout, e.g. while the store fails: it stays queued)."""
        with self._cond:
            target = self._next_seq
            self._flush_requested = True
            self._cond.notify()
            return self._cond.wait_for(
                lambda: self._done_upto() >= target or not self._thread.is_alive(), timeout) \
                and self._done_upto() >= target

    def write_now(self) -> None:
        """Have the writer write what is queued now, without waiting for it: the intake
        calls it after each round, so that the writer runs while the intake sleeps
        instead of both contending for the interpreter at once."""
        with self._cond:
            self._flush_requested = True
            self._cond.notify()

    def wait_until_pending_at_most(self, n: int, timeout: float) -> bool:
        """Wait until at most n events are pending (the writer notifies after each
        transaction), the writer is closing, or `timeout` has passed; True unless it timed
        out."""
        with self._cond:
            return self._cond.wait_for(lambda: self.pending <= n or self._stopping, timeout)

    def _done_upto(self) -> int:
        """Every item up to this seq is committed (or, an acknowledged one, failed)."""
        waiting = [s for s in (self._in_flight, self._queue[0].seq if self._queue else None)
                   if s is not None]
        return min(waiting) - 1 if waiting else self._next_seq

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued (retrying a failing store until `timeout`), stop the
        writer and close its connection. What still could not be written is counted as
        store_error and logged."""
        with self._cond:
            if self._stopping:
                return
            self._stopping = True
            self._close_deadline = time.monotonic() + timeout
            self._cond.notify()
        self._thread.join(timeout + 5.0)
        with self._cond:
            left = list(self._queue)
            self._queue.clear()
        for item in left:
            self._fail(item, "the writer closed before the store accepted it")
        lost = sum(1 for item in left if item.counted)
        if lost:
            self.rejected["store_error"] += lost
            self._say("error", f"{lost} accepted results could not be written before "
                               f"shutdown: {self.last_error or 'writer did not finish'}")

    # -- the writer thread ------------------------------------------------------------
    def _run(self) -> None:
        try:
            while True:
                try:
                    if not self._step():
                        break
                except Exception as exc:  # a bug here must not stop the writing; say it
                    self.last_error = f"writer: {exc}"
                    _default_log("error", f"ingest writer: {exc!r}")
                    time.sleep(self._retry_period)
        finally:
            self._close_connection()
            with self._cond:
                self._cond.notify_all()

    def _say(self, level: str, text: str) -> None:
        try:
            self._log(level, text)
        except Exception:  # a failing log sink must not stop the writer
            _default_log(level, text)

    def _step(self) -> bool:
        """Wait for work, write one batch; False when the writer should end."""
        with self._cond:
            self._cond.wait_for(lambda: self._acks_waiting or self._flush_requested
                                or self._stopping, timeout=self._period)
            self._flush_requested = False
            if self._stopping and (not self._queue or time.monotonic() > self._close_deadline):
                return False
            batch = [self._queue.popleft()
                     for _ in range(min(len(self._queue), self._max_batch))]
            self._in_flight = batch[0].seq if batch else None
            self._in_flight_count = len(batch)
        if batch and not self._write(batch):
            kept = [item for item in batch if item.ack is None]
            with self._cond:  # back to the front, in order; retry after a pause
                self._queue.extendleft(reversed(kept))
                self._in_flight, self._in_flight_count = None, 0
                self._cond.notify_all()
                self._cond.wait_for(lambda: self._stopping and
                                    time.monotonic() > self._close_deadline,
                                    timeout=self._retry_period)
        self._measure()
        return True

    def _write(self, batch: list[_Item]) -> bool:
        answered: dict[int, RecordedRequest | None] = {}
        try:
            if self._conn is None:
                self._conn = self.partition.store.write_connection()
            # Read once: a request queued meanwhile is behind this batch.
            requests = self._requests_waiting > 0
            with self._conn.begin():
                appended = batch
                if requests:  # else no lookup: the topic path pays nothing
                    appended, answered = self._answer_retries(batch)
                stored = self.partition.append_in(self._conn,
                                                  [item.event for item in appended])
                if requests:
                    self._record_requests(batch, appended, stored, answered)
        except Exception as exc:  # the driver's errors vary; none may lose a queued result
            self._close_connection()  # a broken connection is not reused
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if message != self.last_error:
                self._say("error", f"store write failed, {len(batch)} events kept "
                                   f"pending: {message}")
            self.last_error = message
            with self._cond:
                for item in batch:
                    if item.ack is not None:
                        self._acks_waiting -= 1
                        self._requests_waiting -= item.request is not None
                        self.rejected["store_error"] += 1
                        self._fail(item, f"store write failed: {message}")
            return False
        with self._cond:
            self.written += sum(1 for item in appended if item.counted)
            self._in_flight, self._in_flight_count = None, 0
            self.last_error = ""
            for item, event in zip(appended, stored):
                if item.ack is not None:
                    self._acks_waiting -= 1
                    self._requests_waiting -= item.request is not None
                    item.ack.set_result(event)
            for item in batch if answered else ():
                if id(item) in answered:
                    self._answer(item, answered[id(item)])
            self._cond.notify_all()
        return True

    def _answer_retries(self, batch: list[_Item]
                        ) -> tuple[list[_Item], dict[int, RecordedRequest | None]]:
        """In the write's transaction: the items to append, and the requests answered
        without appending (id(item) -> the record of its id, or None while that record is
        the one this batch appends first: resolved in `_record_requests`)."""
        ids = list({item.request[0] for item in batch if item.request is not None})
        if not ids:  # the requests waiting are queued behind this batch
            return batch, {}
        found = self.partition.recorded_requests_in(self._conn, ids)
        appended, answered, first = [], {}, set()
        for item in batch:
            request = item.request
            if request is None:
                appended.append(item)
            elif request[0] in found:
                answered[id(item)] = found[request[0]]
            elif request[0] in first:  # the same id twice in one batch: stored once
                answered[id(item)] = None
            else:
                first.add(request[0])
                appended.append(item)
        return appended, answered

    def _record_requests(self, batch: list[_Item], appended: list[_Item],
                         stored: list[StoredEvent],
                         answered: dict[int, RecordedRequest | None]) -> None:
        """Record the request ids of the appended events (same transaction), and give
        the batch's repeats of those ids their record."""
        new = {item.request[0]: RecordedRequest(event.id, event.seq, item.request[1])
               for item, event in zip(appended, stored) if item.request is not None}
        self.partition.record_requests_in(self._conn, new)
        for item in batch:
            if answered.get(id(item), False) is None:
                answered[id(item)] = new[item.request[0]]

    def _answer(self, item: _Item, record: RecordedRequest) -> None:  # holds self._cond
        """Resolve a request answered from an earlier commit (not stored again)."""
        self._acks_waiting -= 1
        self._requests_waiting -= 1
        self.accepted -= 1  # taken, but not stored: counted as replayed or refused instead
        if record.result_digest == item.request[1]:
            self.replayed += 1
            item.ack.set_result(Replayed(record.event_id, record.seq))
        else:
            self.rejected[REQUEST_ID_REUSED] += 1
            item.ack.set_exception(reused(item.request[0]))

    @staticmethod
    def _fail(item: _Item, why: str) -> None:
        if item.ack is not None and not item.ack.done():
            item.ack.set_exception(StoreWriteFailed(why))

    def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # already broken; nothing more to release
                pass

    def _measure(self) -> None:
        """Store size for the growth guard, measured here so a slow database (a query
        on PostgreSQL) never holds up whoever receives the results."""
        now = time.monotonic()
        if self._size_of is None or now - self._measured_at < self._measure_period:
            return
        self._measured_at = now
        try:
            self.store_size = self._size_of()
        except Exception as exc:  # keep going on the last known size
            self._say("warning", f"cannot measure the store: {exc}")
            return
        state = self._guard.state(self.store_size)
        if state != self.growth_state and state != GROWTH_OK:
            self._say("warning", self._guard.describe(self.store_size))
        self.growth_state = state


def _as_read(fields: dict[str, Any]) -> dict[str, Any]:
    """The reader of fields read already (take_request reads them to digest them)."""
    return fields


__all__ = ["INVALID", "LOSS_CAUSES", "PRIVACY", "STORE_ERROR", "STORE_FULL",
           "AcknowledgedWrite", "Ingest", "Refused", "Replayed", "RequestIdReused",
           "StoreWriteFailed", "StoredEvent"]

"""Off-the-request-path audit writer for grounding consultations.

The service callback only enqueues; a background thread appends the records in
batches. The queue is bounded: an overflow is counted (and reported by the node),
never silent. `close()` writes whatever is still queued.
"""

from __future__ import annotations

import queue
import threading

from robot_memory.store import NewEvent, Partition


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
                return batch

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

"""episodic_logger: append skills' execution results to the verified identity's log.

A lifecycle node: subscribes to `execution_results` (and `result_topics`) and serves
`record_event` only while active. Each message is validated in the callback; accepted
records are written in one transaction per flush period; rejected ones are logged with
the field and reason and counted on /diagnostics. A privacy rejection is also logged
as a `privacy_rejection` event naming the field and category, never the value.
`record_event` (RecordEvent) answers only once its event is committed. A store error
never loses accepted records: they stay pending and the next flush retries. Past the
growth guard's hard limit new results are refused, loudly.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.executors import MultiThreadedExecutor

from robot_memory.errors import InputError
from robot_memory.event_kinds import EXECUTION_RESULT, PRIVACY_REJECTION
from robot_memory.growth import OK as GROWTH_OK
from robot_memory.growth import OVER_HARD_LIMIT, GrowthGuard
from robot_memory.msg import ExecutionResult
from robot_memory.records import ExecutionRecord, InvalidRecord
from robot_memory.ros.conversions import record_from_msg
from robot_memory.ros.diagnostics import ERROR, OK, WARN, DiagnosticsPublisher
from robot_memory.ros.managed_node import ManagedMemoryNode
from robot_memory.ros.params import declare_parameters
from robot_memory.ros.qos import EXECUTION_RESULTS_QOS
from robot_memory.ros.spin import NodeSpec, run_node
from robot_memory.srv import RecordEvent
from robot_memory.store import MemoryStore, NewEvent
from robot_memory.store.size import MB, store_size_bytes

DEFAULT_TOPIC = "execution_results"
PRIVACY_PREFIX = "privacy_"


class Refused(InputError):
    """A result not taken: `code` is RecordEvent's reason code, `reason` the count key."""

    def __init__(self, code: str, reason: str, detail: str):
        super().__init__(detail)
        self.code, self.reason, self.detail = code, reason, detail


class EpisodicLogger(ManagedMemoryNode):
    def __init__(self, **kwargs):
        super().__init__("episodic_logger", **kwargs)
        self.params = declare_parameters(self, "episodic_logger")
        self.topics = [DEFAULT_TOPIC] + [t for t in self.params["result_topics"]
                                         if t != DEFAULT_TOPIC]
        self.guard = GrowthGuard(self.params["growth_limit_mb"], self.params["hard_limit_mb"])
        self.partition = None
        self._pending: list[NewEvent] = []
        self._lock = threading.Lock()
        self.accepted = 0
        self.written = 0
        self._written_at_last_status = (0, time.monotonic())
        self.rejected: Counter[str] = Counter()
        self.last_store_error = ""
        self.store_size = 0
        self.growth_state = GROWTH_OK
        wall = Clock(clock_type=ClockType.STEADY_TIME)
        # Writing blocks on disk; keep it off the group that receives messages. The
        # acknowledged path has a group of its own: sharing one with the flush timer, which
        # is always due under sustained load, starved it for seconds. One lock orders the
        # writes instead, so an acknowledged event still lands after the pending batch.
        self._write_lock = threading.Lock()
        self._io_group = MutuallyExclusiveCallbackGroup()
        self._ack_group = MutuallyExclusiveCallbackGroup()
        self.diagnostics = DiagnosticsPublisher(self)
        self.create_timer(self.params["flush_period_s"], self.flush, self._io_group, clock=wall)
        self.create_timer(self.params["diagnostics_period_s"], self._publish_diagnostics,
                          self._io_group, clock=wall)

    def start(self, identity_hash: str) -> None:
        self.partition = MemoryStore(self.params["database_url"]).partition(identity_hash)
        self._measure_store()
        for topic in self.topics:
            self.active_entities.append(self.create_subscription(
                ExecutionResult, topic, lambda msg, t=topic: self.on_execution_result(msg, t),
                EXECUTION_RESULTS_QOS))
        self.active_entities.append(self.create_service(
            RecordEvent, "record_event", self.on_record_event, callback_group=self._ack_group))
        self.get_logger().info(f"logging execution results from {self.topics} and the "
                               "record_event service")

    def stop(self) -> None:
        self.flush()  # what was accepted reaches the disk before we stop
        with self._write_lock:  # an acknowledged write in progress finishes first
            self.partition = None

    # -- intake -----------------------------------------------------------------------
    def _take(self, msg: ExecutionResult, source: str) -> ExecutionRecord:
        """Validate one result, or raise Refused (counted and logged here)."""
        try:
            if self.growth_state == OVER_HARD_LIMIT:
                raise Refused(RecordEvent.Response.REASON_STORE_FULL, "store_full",
                              self.guard.describe(self.store_size))
            try:
                return record_from_msg(msg, self.get_clock().now().nanoseconds)
            except InvalidRecord as exc:
                if exc.reason.startswith(PRIVACY_PREFIX):
                    self._log_privacy_rejection(exc, source)
                    raise Refused(RecordEvent.Response.REASON_PRIVACY, exc.reason,
                                  f"{exc.field}: {exc.detail}") from None
                raise Refused(RecordEvent.Response.REASON_INVALID, exc.reason,
                              f"{exc.field}: {exc.detail}") from None
        except Refused as refused:
            self.rejected[refused.reason] += 1
            text = f"rejected execution result on {source}: {refused.detail} " \
                   f"(reason {refused.reason})"
            if refused.reason == "store_full":  # every result now: say it loudly, not 1000x/s
                self.get_logger().error(text, throttle_duration_sec=1.0)
            else:
                self.get_logger().warning(text)
            raise

    def _log_privacy_rejection(self, exc: InvalidRecord, source: str) -> None:
        """The refusal goes in the log as an event: where and what kind, no part of it."""
        event = NewEvent(PRIVACY_REJECTION,
                         {"source": source, "field": exc.field,
                          "category": exc.reason[len(PRIVACY_PREFIX):]},
                         self.get_clock().now().nanoseconds)
        with self._lock:
            self._pending.append(event)

    def on_execution_result(self, msg: ExecutionResult, topic: str) -> None:
        try:
            record = self._take(msg, topic)
        except Refused:
            return
        with self._lock:
            if len(self._pending) >= self.params["max_pending"]:
                self.rejected["backlog_full"] += 1
                self.get_logger().error(f"rejected execution result on {topic}: backlog of "
                                        f"{len(self._pending)} unwritten results is full",
                                        throttle_duration_sec=1.0)
                return
            self._pending.append(NewEvent(EXECUTION_RESULT, record.payload(), record.stamp_ns))
            self.accepted += 1

    def on_record_event(self, request, response):
        """Acknowledged write: answer with the event id only once it is committed."""
        if self.partition is None:
            response.reason_code = RecordEvent.Response.REASON_INACTIVE
            response.reason = f"inactive: {self.inactive_reason}"
            return response
        try:
            record = self._take(request.result, "record_event")
        except Refused as refused:
            response.reason_code, response.reason = refused.code, refused.detail
            self.flush()  # a privacy_rejection event, if any, is durable too
            return response
        self.accepted += 1
        try:  # after what is pending, in the same transaction: log order is arrival order
            stored = self._write_pending(
                NewEvent(EXECUTION_RESULT, record.payload(), record.stamp_ns))
        except Exception:  # the driver's errors vary; the caller must know
            self.rejected["store_error"] += 1
            response.reason_code = RecordEvent.Response.REASON_STORE_ERROR
            response.reason = f"not recorded, store write failed: {self.last_store_error}"
            return response
        if stored is None:  # deactivated while waiting for the write lock
            response.reason_code = RecordEvent.Response.REASON_INACTIVE
            response.reason = f"inactive: {self.inactive_reason}"
            return response
        response.accepted, response.event_id, response.seq = True, stored.id, stored.seq
        return response

    # -- writing ----------------------------------------------------------------------
    def flush(self) -> None:
        """Write everything pending in one transaction; on failure keep it for the next try."""
        try:
            self._write_pending()
        except Exception:  # logged and kept pending by _write_pending; retried next period
            pass

    def _write_pending(self, extra: NewEvent | None = None):
        """Write the pending events, then `extra`, in one transaction; return the stored
        `extra` (None if there is none or the node is inactive). On failure the pending
        events go back to the queue, the error is logged once, and it propagates."""
        with self._write_lock:
            partition = self.partition
            if partition is None:
                return None
            with self._lock:
                batch, self._pending = self._pending, []
            events = batch + ([extra] if extra is not None else [])
            if not events:
                return None
            try:
                stored = partition.append_many(events)
            except Exception as exc:  # the driver's errors vary; none may lose accepted records
                with self._lock:
                    self._pending[:0] = batch
                message = str(exc).splitlines()[0]
                if message != self.last_store_error:
                    self.get_logger().error(f"store write failed, {len(batch)} events kept "
                                            f"pending: {message}")
                self.last_store_error = message
                raise
            self.written += sum(1 for e in events if e.kind == EXECUTION_RESULT)
            self.last_store_error = ""
            return stored[-1] if extra is not None else None

    def _measure_store(self) -> None:
        if self.partition is None:
            return
        try:
            self.store_size = store_size_bytes(self.partition.store)
        except Exception as exc:  # keep logging on the last known size; never die here
            self.get_logger().warning(f"cannot measure the store: {exc}",
                                      throttle_duration_sec=60.0)
            return
        state = self.guard.state(self.store_size)
        if state != self.growth_state and state != GROWTH_OK:
            self.get_logger().warning(self.guard.describe(self.store_size))
        self.growth_state = state

    def _publish_diagnostics(self) -> None:
        self._measure_store()
        written, since = self._written_at_last_status
        now = time.monotonic()
        rate = (self.written - written) / max(now - since, 1e-6)
        self._written_at_last_status = (self.written, now)
        if self.partition is None:
            level, message = WARN, f"inactive: {self.inactive_reason}"
        elif self.last_store_error:
            level, message = ERROR, f"store write failing: {self.last_store_error}"
        elif self.growth_state == OVER_HARD_LIMIT:
            level, message = ERROR, self.guard.describe(self.store_size)
        elif self.growth_state != GROWTH_OK:
            level, message = WARN, self.guard.describe(self.store_size)
        else:
            level, message = OK, "logging"
        values = {"accepted": self.accepted, "written": self.written,
                  "memory_write_performed": str(self.written > written).lower(),
                  "memory_integrity_status": self.gate.state_name,
                  "ingest_rate_per_s": round(rate, 1), "queue_depth": len(self._pending),
                  "pending": len(self._pending), "rejected_total": sum(self.rejected.values()),
                  "store_size_mb": round(self.store_size / MB, 3),
                  "growth_state": self.growth_state,
                  "identity_hash": self.gate.identity_hash or ""}
        values.update({f"rejected.{reason}": n for reason, n in self.rejected.items()})
        self.diagnostics.publish(level, message, values)


def node_spec() -> NodeSpec:
    # Accepted results reach the disk before the process goes.
    return NodeSpec(EpisodicLogger, lambda: MultiThreadedExecutor(num_threads=3),
                    before_destroy=lambda node: node.flush())


def main(args=None) -> None:
    run_node(node_spec(), args)


if __name__ == "__main__":
    main(sys.argv)

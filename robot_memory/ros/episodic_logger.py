"""episodic_logger: append skills' execution results to the verified identity's log.

A lifecycle node over `robot_memory.intake.ingest.Ingest`, which holds the queue, the writer
thread and the counts: configured, it holds the store and the Ingest; while active it
subscribes to `execution_results` (and `result_topics`), and an intake thread
(ros/logger_intake.py) takes whatever has arrived every `intake_period_s`, reads,
validates and queues it, so the single-threaded executor only serves services,
timers and the readers' rare message-lost events, and the writer thread does all the I/O.
`record_event` exists from startup: it answers `inactive` with the reason until the node
is active, then only once its event is committed (an async callback, so waiting for the
commit never holds up the topics). A request id makes a retry answer with the first
commit's event instead of storing again (intake/requests.py), also after a restart.
With `durable_results` the readers are transient-local: a restarted logger gets what the
publishers still hold, and stores each result once (ros/redelivery.py).
Whatever is not stored is counted by cause (validation reasons, privacy, store_full,
backlog_full, store_error, and dds_lost from the subscriptions' message-lost event) and
shown on /diagnostics, WARN when anything was lost; results delivered again and already
stored are skipped and counted apart (redelivered), not as a loss.
"""

from __future__ import annotations

import sys
import time
from collections import Counter

from rclpy.clock import Clock, ClockType
from rclpy.event_handler import QoSMessageLostInfo, SubscriptionEventCallbacks
from rclpy.task import Future as RosFuture

from robot_memory.retention.growth import OVER_HARD_LIMIT, GrowthGuard
from robot_memory.retention.growth import OK as GROWTH_OK
from robot_memory.intake.ingest import LOSS_CAUSES, Ingest, Refused, StoreWriteFailed
from robot_memory.intake.requests import Replayed, RequestIdReused
from robot_memory.operation.log_throttle import LogThrottle, held_back
from robot_memory.msg import ExecutionResult
from robot_memory.ros.conversions import result_fields, result_reader
from robot_memory.ros.diagnostics import ERROR, OK, WARN, DiagnosticsPublisher
from robot_memory.operation.heap import WORTH_RELEASING_MB, release_freed_memory
from robot_memory.ros.logger_intake import (HOLD_AT_MOST, IntakeThread, TakenByIntake,
                                            _taken_by_intake_only)
from robot_memory.ros.managed_node import ManagedMemoryNode
from robot_memory.ros.params import declare_parameters
from robot_memory.ros.qos import execution_results_reader_qos
from robot_memory.ros.rclpy_internals import poll_event, taking
from robot_memory.intake.redelivery import Redelivery, sample_of, stored_samples
from robot_memory.ros.spin import NodeSpec, run_node
from robot_memory.ros.unheard_publishers import UnheardPublishers
from robot_memory.srv import RecordEvent
from robot_memory.store import MemoryStore, NewEvent
from robot_memory.store.size import MB, store_size_bytes

DEFAULT_TOPIC = "execution_results"
# After this many results written since the last trim, and nothing pending, give the
# freed heap back (a burst's results, in flight, leave glibc's arenas at their peak).
TRIM_AFTER_WRITTEN = 5000


class EpisodicLogger(ManagedMemoryNode):
    def __init__(self, **kwargs):
        super().__init__("episodic_logger", **kwargs)
        self.params = declare_parameters(self, "episodic_logger")
        self.topics = [DEFAULT_TOPIC] + [t for t in self.params["result_topics"]
                                         if t != DEFAULT_TOPIC]
        self.guard = GrowthGuard(self.params["growth_limit_mb"], self.params["hard_limit_mb"])
        self.store: MemoryStore | None = None
        self.ingest: Ingest | None = None
        self._taken_by_intake = TakenByIntake()
        self._intake: IntakeThread | None = None
        self._result_subscriptions: dict = {}
        self._lost_events: dict = {}  # topic: its subscription's event handlers (polled)
        # What the log holds of the samples publishers may deliver again; read by the
        # intake thread before its first take (None until then).
        self._redelivery: Redelivery | None = None
        self._redelivered = 0  # samples skipped as already stored, over all activations
        self._taken_in_round = 0  # results taken since the drain at stop last looked
        # Rejections are counted one by one, but logged at most once a second per topic
        # and reason: a flood of bad results must not cost a log line each.
        self._log_throttle = LogThrottle()
        # Counts of earlier configurations (an Ingest lives from configure to cleanup).
        self._before = Counter()
        self._before_rejected: Counter[str] = Counter()
        self._written_at_last_status = (0, time.monotonic())
        self._written_at_last_trim = 0
        self.diagnostics = DiagnosticsPublisher(self)
        # A result's fields, read from its bytes; one that rclpy has to read is said once.
        self._read_result = result_reader(self.diagnostics.fast_path_off)
        self._reader_qos = execution_results_reader_qos(self.params["history_depth"],
                                                        self.params["keep_all_history"],
                                                        self.params["durable_results"])
        self._unheard = UnheardPublishers()
        # From startup, so a producer learns why nothing is recorded instead of waiting.
        self.create_service(RecordEvent, "record_event", self.on_record_event)
        self.create_timer(self.params["diagnostics_period_s"], self._publish_diagnostics,
                          clock=Clock(clock_type=ClockType.STEADY_TIME))

    def acquire(self, identity_hash: str) -> None:
        """On configure: the store, and the Ingest whose writer thread appends to it."""
        self.store = MemoryStore(self.params["database_url"])
        store = self.store
        self.require_verified_store(store)
        self.ingest = Ingest(
            store.partition(identity_hash), max_pending=self.params["max_pending"],
            flush_period_s=self.params["flush_period_s"], guard=self.guard,
            size_of=lambda: store_size_bytes(store),
            measure_period_s=self.params["diagnostics_period_s"], log=self._log,
            now_ns=lambda: self.get_clock().now().nanoseconds,
            max_clock_ahead_s=self.params["max_clock_ahead_s"])

    def start(self, identity_hash: str) -> None:
        """On activate: the result subscriptions and the intake thread that takes from
        them (destroyed on deactivate: a reader exists only while results are logged)."""
        qos = self._reader_qos
        for topic in self.topics:
            events = SubscriptionEventCallbacks(message_lost=self.on_message_lost,
                                                use_default_callbacks=False)
            # Taken as bytes (raw): the fields are read from them, no message object.
            # The callback never runs: the group keeps the executor away, take_arrived takes.
            subscription = self.create_subscription(
                ExecutionResult, topic, _taken_by_intake_only, qos,
                callback_group=self._taken_by_intake, event_callbacks=events, raw=True)
            self._result_subscriptions[topic] = subscription
            self._lost_events[topic] = subscription.event_handlers
            self.active_entities.append(subscription)
        ingest = self.ingest
        self._intake = IntakeThread(
            self.params["intake_period_s"], self.take_arrived, self.get_logger(),
            room=lambda timeout: ingest.wait_until_pending_at_most(HOLD_AT_MOST // 2,
                                                                   timeout))
        self.get_logger().info(f"logging execution results from {self.topics} and the "
                               "record_event service")

    def stop(self) -> None:
        """On deactivate: stop taking results, then write what was accepted (the store
        and its writer stay until cleanup)."""
        intake, self._intake = self._intake, None
        if intake is not None:
            intake.stop()  # returns once the round in progress has queued what it took
            self._drain_readers(self.params["drain_on_stop_s"])
        self._result_subscriptions.clear()
        self._lost_events.clear()
        self._redelivery = None  # read again from the log at the next activation
        if self.ingest is not None and not self.ingest.flush():
            self.get_logger().error(f"{self.ingest.pending} accepted results not yet "
                                    "written at deactivation; they are written at cleanup")

    def _drain_readers(self, within_s: float) -> None:
        """Take what has reached the readers (published, even acknowledged by DDS, but not
        taken yet: up to intake_period_s of results) until a round finds nothing or
        `within_s` runs out; what is still unread then is taken, counted
        (unread_at_stop) and logged, not stored. Results still on their way are not
        known here (durable_results lets a restarted logger get them)."""
        ingest = self.ingest
        if ingest is None:
            return
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            self._taken_in_round = 0
            try:
                full = self.take_arrived()
            except Exception as exc:  # the store failed: what is unread is counted below
                self.get_logger().error(f"draining the readers at stop failed: {exc!r}")
                break
            if full:
                ingest.wait_until_pending_at_most(HOLD_AT_MOST // 2,
                                                  max(0.0, deadline - time.monotonic()))
            elif self._taken_in_round == 0:
                return
        unread = self._discard_unread()
        if unread:
            ingest.count("unread_at_stop", unread)
            self.get_logger().error(
                f"{unread} results still unread in the readers when the logger stopped "
                f"were not stored (drain_on_stop_s {within_s:g} s ran out; "
                "reason unread_at_stop)")

    def _discard_unread(self, at_most: int = 1_000_000) -> int:
        """Take and count what the readers still hold (a reader's history is bounded)."""
        count = 0
        for subscription in list(self._result_subscriptions.values()):
            with taking(subscription) as take:
                while count < at_most and take() is not None:
                    count += 1
        return count

    def release(self) -> None:
        """On cleanup: the writer appends what is queued and ends, then the store closes
        (idempotent)."""
        ingest, self.ingest = self.ingest, None
        if ingest is not None:
            ingest.close()
            self._before.update(accepted=ingest.accepted, written=ingest.written,
                                clock_skew=ingest.clock_skew, replayed=ingest.replayed)
            self._before_rejected.update(ingest.rejected)
        store, self.store = self.store, None
        if store is not None:
            store.close()

    def close(self) -> None:
        """Before the node is destroyed, in whatever state: accepted results reach the
        disk, the store closes."""
        self.stop()
        self.release()

    # -- intake -----------------------------------------------------------------------
    def _log_refusal(self, refused: Refused, source: str) -> None:
        self._log_at_most_once_a_second(
            (source, refused.reason),
            "error" if refused.reason == "store_full" else "warning",  # store_full: loudly
            f"rejected execution result on {source}: {refused.detail} "
            f"(reason {refused.reason})")

    def take_arrived(self) -> bool:
        """One round of the intake thread: take every result that has arrived, topic by
        topic, skipping those the log holds already (a publisher delivers its history
        again to a restarted logger), while fewer than HOLD_AT_MOST wait for the writer.
        The round's start is the receipt time of what it takes (within intake_period_s).
        True when a topic may hold more than there was room for."""
        taken_any, ingest, full = False, self.ingest, False
        if ingest is None:
            return False
        # Volatile readers get nothing again: no sample to recognise, none recorded.
        durable = self.params["durable_results"]
        redelivery = (self._redelivery or self._read_what_the_log_holds(ingest)) \
            if durable else None
        received_ns = self.get_clock().now().nanoseconds
        redelivered = 0
        take_received = ingest.take_received  # once per result: no lookups in the loop
        read_result = self._read_result
        for topic, subscription in list(self._result_subscriptions.items()):
            events = []
            room = min(HOLD_AT_MOST, ingest.max_pending) - ingest.pending
            try:
                # rclpy has no public take (ros/rclpy_internals.py).
                with taking(subscription) as take:
                    for _ in range(max(0, room)):
                        taken = take()
                        if taken is None:
                            break
                        taken_any = True
                        self._taken_in_round += 1
                        data, info = taken
                        sample = sample_of(info) if durable else None
                        if sample is not None and not redelivery.is_new(sample):
                            redelivered += 1
                            continue
                        # The result's event, read from the serialized bytes, or why not.
                        event = take_received(read_result, data, topic, received_ns, sample)
                        if isinstance(event, Refused):
                            self._log_refusal(event, topic)
                        else:
                            events.append(event)
                    else:  # no None: the room ran out first
                        full = True
            finally:  # what was taken is queued, whatever ended the loop
                self._submit(events, topic)
            for handler in self._lost_events.get(topic, ()):
                info = poll_event(handler)
                if info is not None:
                    self.on_message_lost(info)
        if redelivered:
            self._redelivered += redelivered
            self._log_at_most_once_a_second(
                "redelivered", "info", f"{redelivered} results delivered again by their "
                "publishers were stored already: skipped (redelivered)")
        if taken_any:
            ingest.write_now()
        return full

    def _read_what_the_log_holds(self, ingest: Ingest) -> Redelivery:
        """The samples among the newest redelivery_window events of the log, before the
        first take of an activation (a store that fails here fails the round: retried
        next period, while the results wait in the readers)."""
        redelivery = Redelivery(self.params["redelivery_window"])
        redelivery.remember(*stored_samples(ingest.partition, self.params["redelivery_window"]))
        self._redelivery = redelivery
        return redelivery

    def _submit(self, events: list[NewEvent], topic: str) -> None:
        ingest = self.ingest
        if not events or ingest is None:
            return
        if ingest.submit_events(events):
            self._log_at_most_once_a_second(
                (topic, "backlog_full"), "error",
                f"rejected execution result on {topic}: backlog of {ingest.pending} "
                "unwritten results is full (reason backlog_full)")

    def on_message_lost(self, info: QoSMessageLostInfo) -> None:
        """DDS reports results it dropped before we could take them."""
        lost = int(info.total_count_change)
        if lost <= 0:
            return
        if self.ingest is not None:
            self.ingest.count("dds_lost", lost)
        else:
            self._before_rejected["dds_lost"] += lost
        self._log_at_most_once_a_second(
            "dds_lost", "error", f"{lost} execution results lost in DDS before the logger "
            f"took them (total {info.total_count}; reason dds_lost)")

    async def on_record_event(self, request, response):
        """Acknowledged write: answer with the event id only once it is committed."""
        ingest = self.ingest
        if ingest is None or not self.serving:
            response.reason_code = RecordEvent.Response.REASON_INACTIVE
            response.reason = f"inactive: {self.inactive_reason}"
            return response
        write = ingest.take_request(result_fields, request.result, "record_event",
                                    self.get_clock().now().nanoseconds, request.request_id)
        if isinstance(write, Refused):
            self._log_refusal(write, "record_event")
            response.reason_code, response.reason = write.code, write.detail
            return response
        try:
            stored = await self._committed(ingest.record_event(write))
        except StoreWriteFailed as exc:
            response.reason_code = RecordEvent.Response.REASON_STORE_ERROR
            response.reason = f"not recorded, {exc}"
            return response
        except RequestIdReused as exc:
            response.reason_code = RecordEvent.Response.REASON_REQUEST_ID_REUSED
            response.reason = str(exc)
            return response
        response.accepted, response.event_id, response.seq = True, stored.id, stored.seq
        response.replayed = type(stored) is Replayed
        return response

    async def _committed(self, ack):
        """Wait for the writer thread's commit without blocking the executor."""
        done = RosFuture(executor=self.executor)
        # A done callback makes set_result (called on the writer thread) wake the executor.
        done.add_done_callback(lambda _: None)
        ack.add_done_callback(lambda _: done.set_result(None))
        await done
        return ack.result()

    def _log_at_most_once_a_second(self, kind, level: str, text: str) -> None:
        """`_log` the first line of a kind at once, then at most one a second, saying how
        many were held back (every one of them is counted where it happens)."""
        held = self._log_throttle.admit(kind)
        if held is not None:
            self._log(level, text + held_back(held))

    # -- status -----------------------------------------------------------------------
    def _look_for_unheard_publishers(self) -> None:
        """Log each publisher on a result topic that the reader cannot hear, once, when
        it appears: DDS drops all it sends without counting anything as lost."""
        try:
            new = self._unheard.look(self, self.topics, self._reader_qos)
        except Exception as exc:  # the graph is gone while shutting down; look next time
            self.get_logger().debug(f"cannot read the ROS graph: {exc!r}")
            return
        for where, why in sorted(new.items()):
            self._log("error", f"publisher {where} cannot be heard: {why}; nothing it "
                               "publishes is received or counted (unheard_publishers)")

    def _counts(self) -> tuple[int, int, int, Counter[str]]:
        """accepted, written, pending and rejections by reason, over all activations."""
        ingest = self.ingest
        rejected = Counter(self._before_rejected)
        if ingest is None:
            return self._before["accepted"], self._before["written"], 0, rejected
        rejected.update(ingest.rejected)
        return (self._before["accepted"] + ingest.accepted,
                self._before["written"] + ingest.written, ingest.pending, rejected)

    def _publish_diagnostics(self) -> None:
        self._look_for_unheard_publishers()
        unheard = self._unheard.now
        ingest = self.ingest
        accepted, written, pending, rejected = self._counts()
        previous, since = self._written_at_last_status
        now = time.monotonic()
        rate = (written - previous) / max(now - since, 1e-6)
        self._written_at_last_status = (written, now)
        if not pending and written - self._written_at_last_trim >= TRIM_AFTER_WRITTEN:
            self._written_at_last_trim = written
            release_freed_memory(WORTH_RELEASING_MB)
        store_size = ingest.store_size if ingest else 0
        growth_state = ingest.growth_state if ingest else GROWTH_OK
        lost = {cause: rejected[cause] for cause in LOSS_CAUSES if rejected[cause]}
        if ingest is None or not self.serving:
            level, message = WARN, f"inactive: {self.inactive_reason}"
        elif ingest.last_error:
            level, message = ERROR, f"store write failing: {ingest.last_error}"
        elif growth_state == OVER_HARD_LIMIT:
            level, message = ERROR, self.guard.describe(store_size)
        elif growth_state != GROWTH_OK:
            level, message = WARN, self.guard.describe(store_size)
        else:
            level, message = OK, "logging"
        if lost:
            level = max(level, WARN)
            message += "; results lost: " + ", ".join(f"{n} {cause}"
                                                      for cause, n in sorted(lost.items()))
        clock_skew = self._before["clock_skew"] + (ingest.clock_skew if ingest else 0)
        if clock_skew:
            level = max(level, WARN)
            message += (f"; {clock_skew} results stamped more than max_clock_ahead_s ahead "
                        "of this clock, stored at their receipt time (clock_skew)")
        if unheard:
            level = max(level, WARN)
            message += "; unheard publishers: " + ", ".join(
                f"{where} ({why})" for where, why in sorted(unheard.items()))
        values = {"accepted": accepted, "written": written,
                  "memory_write_performed": str(written > previous).lower(),
                  "memory_integrity_status": self.gate.state_name,
                  "ingest_rate_per_s": round(rate, 1), "queue_depth": pending,
                  "pending": pending, "rejected_total": sum(rejected.values()),
                  "lost_total": sum(lost.values()), "clock_skew": clock_skew,
                  "redelivered": self._redelivered,
                  "replayed_requests": self._before["replayed"] + (ingest.replayed
                                                                   if ingest else 0),
                  "durability": ("transient_local" if self.params["durable_results"]
                                 else "volatile"),
                  "history": ("keep_all" if self.params["keep_all_history"] else
                              f"keep_last {self.params['history_depth']}"),
                  "store_size_mb": round(store_size / MB, 3),
                  "growth_state": growth_state, "identity_hash": self.gate.identity_hash or ""}
        values.update({f"rejected.{reason}": n for reason, n in rejected.items()})
        values["unheard_publishers"] = len(unheard)
        values.update({f"unheard.{where}": why for where, why in unheard.items()})
        self.diagnostics.publish(level, message, values)


def node_spec() -> NodeSpec:
    # Accepted results reach the disk before the process goes.
    return NodeSpec(EpisodicLogger, before_destroy=lambda node: node.close())


def main(args=None) -> None:
    run_node(node_spec(), args)


if __name__ == "__main__":
    main(sys.argv)

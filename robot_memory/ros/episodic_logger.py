"""episodic_logger: append skills' execution results to the verified identity's log.

Subscribes to `execution_results` (and `result_topics`) only once the identity is
VERIFIED. Each message is validated in the callback; accepted records are written in
one transaction per flush period; rejected ones are logged with the field and reason
and counted on /diagnostics. A store error never loses accepted records: they stay
pending and the next flush retries.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.executors import MultiThreadedExecutor

from robot_memory.event_kinds import EXECUTION_RESULT
from robot_memory.msg import ExecutionResult
from robot_memory.records import InvalidRecord
from robot_memory.ros.conversions import record_from_msg
from robot_memory.ros.diagnostics import ERROR, OK, WARN, DiagnosticsPublisher
from robot_memory.ros.managed_node import ManagedMemoryNode
from robot_memory.ros.params import declare_parameters
from robot_memory.ros.spin import run_node
from robot_memory.ros.qos import EXECUTION_RESULTS_QOS
from robot_memory.store import MemoryStore, NewEvent

DEFAULT_TOPIC = "execution_results"


class EpisodicLogger(ManagedMemoryNode):
    def __init__(self, **kwargs):
        super().__init__("episodic_logger", **kwargs)
        self.params = declare_parameters(self, "episodic_logger")
        self.topics = [DEFAULT_TOPIC] + [t for t in self.params["result_topics"]
                                         if t != DEFAULT_TOPIC]
        self.partition = None
        self._pending: list[NewEvent] = []
        self._lock = threading.Lock()
        self.accepted = 0
        self.written = 0
        self.rejected: Counter[str] = Counter()
        self.last_store_error = ""
        wall = Clock(clock_type=ClockType.STEADY_TIME)
        # Writing blocks on disk; keep it off the group that receives messages.
        self._io_group = MutuallyExclusiveCallbackGroup()
        self.diagnostics = DiagnosticsPublisher(self)
        self.create_timer(self.params["flush_period_s"], self.flush, self._io_group, clock=wall)
        self.create_timer(self.params["diagnostics_period_s"], self._publish_diagnostics,
                          clock=wall)

    def start(self, identity_hash: str) -> None:
        self.partition = MemoryStore(self.params["database_url"]).partition(identity_hash)
        for topic in self.topics:
            self.active_entities.append(self.create_subscription(
                ExecutionResult, topic, lambda msg, t=topic: self.on_execution_result(msg, t),
                EXECUTION_RESULTS_QOS))
        self.get_logger().info(f"logging execution results from {self.topics}")

    def stop(self) -> None:
        self.flush()  # what was accepted reaches the disk before we stop
        self.partition = None

    def on_execution_result(self, msg: ExecutionResult, topic: str) -> None:
        try:
            record = record_from_msg(msg, self.get_clock().now().nanoseconds)
        except InvalidRecord as exc:
            self.rejected[exc.reason] += 1
            self.get_logger().warning(f"rejected execution result on {topic}: {exc.field}: "
                                   f"{exc.detail} (reason {exc.reason})")
            return
        with self._lock:
            if len(self._pending) >= self.params["max_pending"]:
                self.rejected["backlog_full"] += 1
                self.get_logger().error(f"rejected execution result on {topic}: backlog of "
                                        f"{len(self._pending)} unwritten results is full")
                return
            self._pending.append(NewEvent(EXECUTION_RESULT, record.payload(), record.stamp_ns))
            self.accepted += 1

    def flush(self) -> None:
        """Write everything pending in one transaction; on failure keep it for the next try."""
        if self.partition is None:
            return
        with self._lock:
            batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            self.partition.append_many(batch)
        except Exception as exc:  # the driver's errors vary; none may lose accepted records
            with self._lock:
                self._pending[:0] = batch
            if str(exc) != self.last_store_error:
                self.get_logger().error(f"store write failed, {len(batch)} results kept "
                                        f"pending: {exc}")
            self.last_store_error = str(exc)
            return
        self.written += len(batch)
        self.last_store_error = ""

    def _publish_diagnostics(self) -> None:
        if self.partition is None:
            level, message = WARN, f"inactive: {self.inactive_reason}"
        elif self.last_store_error:
            level, message = ERROR, f"store write failing: {self.last_store_error}"
        else:
            level, message = OK, "logging"
        values = {"accepted": self.accepted, "written": self.written,
                  "pending": len(self._pending), "rejected_total": sum(self.rejected.values()),
                  "identity_hash": self.gate.identity_hash or ""}
        values.update({f"rejected.{reason}": n for reason, n in self.rejected.items()})
        self.diagnostics.publish(level, message, values)


def main(args=None) -> None:
    run_node(EpisodicLogger, args, make_executor=lambda: MultiThreadedExecutor(num_threads=2),
             before_destroy=lambda node: node.flush())  # accepted results reach the disk before we go


if __name__ == "__main__":
    main(sys.argv)

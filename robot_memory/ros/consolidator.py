"""consolidator: consolidation passes for the verified identity.

A lifecycle node over `robot_memory.consolidation.service.ConsolidationService`, which
holds the pass policy (when to pass and to compact, what to publish and to skip, the
growth guard's pause, the counts): this node wires parameters, timers, services and
topics to it, and turns what it returns into messages.

A pass runs on `period_s` of the node clock (so sim time is honoured), as soon as
`pass_after_new_events` events are waiting, or on request (`consolidate` service,
which can also preview the pass as a diff). Passes never overlap: one
mutually-exclusive callback group here, and ConcurrentPass across processes. After a
pass the changed facts go on `facts_delta`, and the full snapshot latched on `facts`
while that topic has subscribers; with none, the snapshot waits for the next one to
match (ConsolidationService.snapshot_after_pass).
"""

from __future__ import annotations

import sys

from rclpy.clock import Clock, ClockType
from rclpy.event_handler import PublisherEventCallbacks

from robot_memory.consolidation.diff import format_diff
from robot_memory.consolidation.service import ERROR as SERVICE_ERROR
from robot_memory.consolidation.service import OK as SERVICE_OK
from robot_memory.consolidation.service import WARN as SERVICE_WARN
from robot_memory.consolidation.service import ConsolidationService, FactsUpdate
from robot_memory.grounding.limits import OVERRIDE as OVERRIDE_LIMITS
from robot_memory.grounding.limits import over_limit
from robot_memory.msg import SemanticFactArray
from robot_memory.ros.credentials import CredentialCheck
from robot_memory.ros.diagnostics import ERROR, OK, WARN, DiagnosticsPublisher
from robot_memory.ros.fact_snapshot import FactSnapshot
from robot_memory.ros.managed_node import ActiveTimer, ManagedMemoryNode
from robot_memory.ros.params import declare_parameters
from robot_memory.ros.qos import FACTS_DELTA_QOS, FACTS_QOS
from robot_memory.ros.spin import NodeSpec, run_node
from robot_memory.srv import Consolidate, Override
from robot_memory.store import MemoryStore

LEVELS = {SERVICE_OK: OK, SERVICE_WARN: WARN, SERVICE_ERROR: ERROR}


class Consolidator(ManagedMemoryNode):
    def __init__(self, **kwargs):
        super().__init__("consolidator", **kwargs)
        self.params = declare_parameters(self, "consolidator")
        self.service = ConsolidationService.from_parameters(
            self.params, publish=self._publish_pass, log=self._log,
            now_ns=lambda: self.get_clock().now().nanoseconds)
        self.partition = None
        self.refused_requests = 0  # over a field's size limit (request_limits)
        self._snapshot = FactSnapshot()  # what `facts` carries, kept serialized
        # Lifecycle publishers: they publish only while the node is active. Made here, not
        # on configure, so subscribers have matched them before the first activation (a
        # delta published before the grounding server matched it would be lost). The
        # match callback runs in the node's one callback group, never during a pass.
        self.facts_publisher = self.create_lifecycle_publisher(
            SemanticFactArray, "facts", FACTS_QOS,
            event_callbacks=PublisherEventCallbacks(matched=self._on_facts_matched))
        self.delta_publisher = self.create_lifecycle_publisher(SemanticFactArray,
                                                               "facts_delta", FACTS_DELTA_QOS)
        self.diagnostics = DiagnosticsPublisher(self)  # in every state: it says why
        if self._snapshot.fast_path_off:  # `facts` goes out through rclpy's serializer
            self.diagnostics.fast_path_off("SemanticFactArray", self._snapshot.fast_path_off)
        wall = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(self.params["diagnostics_period_s"], self._publish_diagnostics,
                          clock=wall)
        # Only an operator may change what the robot knows: override, and consolidate
        # unless it is a dry run, need a signed credential; the timers' passes do not.
        self.credentials = CredentialCheck(self, self.params)
        self._consolidate_service = self.create_service(Consolidate, "consolidate",
                                                        self.on_consolidate_request)
        self._override_service = self.create_service(Override, "override",
                                                     self.on_override_request)
        ActiveTimer(self, self.params["period_s"], self.on_pass_timer)  # the node clock
        if self.params["pass_after_new_events"] > 0:
            ActiveTimer(self, self.params["new_event_poll_period_s"], self.on_poll_timer,
                        clock=wall)

    def acquire(self, identity_hash: str) -> None:
        """The store, kept open between passes: a pass then never ends with the
        close-time checkpoint of the whole write-ahead log (see MemoryStore's keep_open);
        and the facts snapshot, read from it."""
        self.partition = MemoryStore(self.params["database_url"],
                                     keep_open=True).partition(identity_hash)
        self.require_verified_store(self.partition.store)
        self._replace_snapshot(self.service.attach(self.partition))

    def start(self, identity_hash: str) -> None:
        facts = self.service.facts_if_stale()
        if facts is not None:
            self._replace_snapshot(facts)
        self.publish_snapshot()
        self.get_logger().info(f"consolidating every {self.params['period_s']} s "
                               f"(node clock), rules {self.service.config}")

    def release(self) -> None:
        self.service.detach()
        self.service.close()  # the fleet store's connections, if shipping
        partition, self.partition = self.partition, None
        self._snapshot.replace_all(())
        if partition is not None:
            partition.store.close()

    def on_pass_timer(self) -> None:
        if self.serving:
            self.service.run_pass()

    def on_poll_timer(self) -> None:
        if self.serving:
            self.service.poll()

    def run_pass(self, apply: bool = True):
        """One pass (or dry run) while active: ConsolidationService.run_pass."""
        return self.service.run_pass(apply) if self.serving else None

    def on_consolidate_request(self, request, response):
        if not self.serving:
            response.success, response.reason = False, f"inactive: {self.inactive_reason}"
            return response
        if not request.dry_run:
            operator, refused = self.credentials.operator_of(
                self._consolidate_service.service_name, request)
            if operator is None:
                response.success, response.reason = False, refused
                return response
        report = self.run_pass(apply=not request.dry_run)
        if report is None:
            response.success, response.reason = False, self.service.last_error
            return response
        response.success = True
        response.diff = format_diff(report)
        response.events_read, response.facts_touched = report.events_read, report.facts_touched
        response.events_skipped = sum(report.skipped.values())
        response.run_event_id = report.run_event_id or 0
        return response

    def on_override_request(self, request, response):
        """Log the override, then apply it with a pass at once (facts and delta follow)."""
        if not self.serving:
            response.reason = f"inactive: {self.inactive_reason}"
            return response
        too_long = over_limit(request, OVERRIDE_LIMITS)
        if too_long is not None:  # refused unread: neither logged nor stored
            self.refused_requests += 1
            response.reason = "refused: {}: {}".format(*too_long)
            return response
        operator, refused = self.credentials.operator_of(self._override_service.service_name,
                                                         request)
        if operator is None:
            response.reason = refused
            return response
        outcome = self.service.override(
            request.action, operator.name, operator.key_id, request.reason,
            fact_id=request.fact_id, kind=request.kind, key=request.key,
            value_json=request.value_json, confidence=request.confidence,
            archive_path=request.archive_path)
        response.success, response.reason = outcome.success, outcome.reason
        response.event_id, response.run_event_id = outcome.event_id, outcome.run_event_id
        return response

    def _replace_snapshot(self, facts) -> None:
        """Every fact's encoding, kept so a pass only encodes the facts it changed."""
        self._snapshot.replace_all(facts)
        self._log_left_out()

    def _log_left_out(self) -> None:
        for (kind, key), why in self._snapshot.left_out.items():
            self.service.warn_once(f"fact {kind} [{key}] left out of the published facts: "
                                   f"{why}")

    def publish_snapshot(self) -> None:
        self.facts_publisher.publish(self._snapshot.message(
            self.partition.identity_hash, self.service.facts_run_event_id or 0, 0,
            self.get_clock().now().to_msg()))
        self.service.snapshot_published()

    def _on_facts_matched(self, status) -> None:
        """A new `facts` subscriber: the middleware hands it the latched snapshot, which
        is older than the facts if passes ran while nobody listened; the current one
        follows it. (Transient local: it reaches the reader even if the reader has not
        yet discovered this writer.)"""
        if self.serving and self.service.snapshot_on_match(status.current_count_change):
            self.publish_snapshot()

    def _publish_pass(self, update: FactsUpdate) -> None:
        """After a pass: refresh the changed facts, publish the delta, then the snapshot."""
        if update.reloaded is not None:  # another process ran a pass in between
            self._replace_snapshot(update.reloaded)
        self.delta_publisher.publish(self._snapshot.delta(
            update.changed, self.partition.identity_hash, update.run_event_id,
            update.previous_run_event_id, self.get_clock().now().to_msg()))
        if self._snapshot.left_out:
            self._log_left_out()
        if self.service.snapshot_after_pass(self.facts_publisher.get_subscription_count()):
            self.publish_snapshot()

    def _publish_diagnostics(self) -> None:
        service = self.service
        values = {**service.diagnostic_values(),
                  "identity_hash": self.gate.identity_hash or "",
                  "memory_integrity_status": self.gate.state_name,
                  "refused_requests": self.refused_requests,
                  "facts_left_out": len(self._snapshot.left_out),
                  **self.credentials.diagnostic_values()}
        values.update({f"left_out.{kind} [{key}]": why
                       for (kind, key), why in self._snapshot.left_out.items()})
        if not self.serving:
            level, message = WARN, f"inactive: {self.inactive_reason}"
        else:
            level, message = service.status(len(self._snapshot.left_out))
            level = LEVELS[level]
        self.diagnostics.publish(level, message, values)


def node_spec() -> NodeSpec:
    return NodeSpec(Consolidator)


def main(args=None) -> None:
    run_node(node_spec(), args)


if __name__ == "__main__":
    main(sys.argv)

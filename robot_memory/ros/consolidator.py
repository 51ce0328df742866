"""consolidator: consolidation passes for the verified identity.

A pass runs on `period_s` of the node clock (so sim time is honoured), as soon as
`pass_after_new_events` events are waiting, or on request (`consolidate` service,
which can also preview the pass as a diff). Passes never overlap: one
mutually-exclusive callback group here, and ConcurrentPass across processes. After a
pass the changed facts go on `facts_delta`, and the full snapshot latched on `facts`
while that topic has subscribers. With none, the snapshot waits for the next one to
match: at 10^4 facts it is 6.6 MB, which framing and handing to the middleware after
every pass held the interpreter that answers `ground` in the one-process sidecar.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from rclpy.clock import Clock, ClockType
from rclpy.event_handler import PublisherEventCallbacks

from robot_memory.consolidation import ConcurrentPass, RulesConfig, consolidation_pass
from robot_memory.consolidation.changes import facts_written
from robot_memory.consolidation.checkpoint import (backlog, facts_at_checkpoint,
                                                   ill_shaped_overrides, read_checkpoint)
from robot_memory.consolidation.overrides import (RESET_SEMANTIC, OverrideError,
                                                  OverridePrivacyRefused, default_archive_path,
                                                  record_override)
from robot_memory.consolidation.reset_archive import archive_path_inside
from robot_memory.consolidation.diff import format_diff
from robot_memory.consolidation.rules import STATUS_ACTIVE
from robot_memory.retention.growth import OK as GROWTH_OK
from robot_memory.retention.growth import GrowthGuard
from robot_memory.msg import SemanticFactArray
from robot_memory.grounding.limits import OVERRIDE as OVERRIDE_LIMITS
from robot_memory.grounding.limits import over_limit
from robot_memory.ros.credentials import CredentialCheck
from robot_memory.ros.diagnostics import ERROR, OK, WARN, DiagnosticsPublisher
from robot_memory.ros.fact_snapshot import FactSnapshot
from robot_memory.operation.heap import WORTH_RELEASING_MB, release_freed_memory
from robot_memory.ros.managed_node import ActiveTimer, ManagedMemoryNode
from robot_memory.ros.params import declare_parameters
from robot_memory.ros.spin import NodeSpec, run_node
from robot_memory.ros.qos import FACTS_DELTA_QOS, FACTS_QOS
from robot_memory.srv import Consolidate, Override
from robot_memory.retention.compaction import compact, default_archive_dir, retention_due
from robot_memory.store import MemoryStore
from robot_memory.store.size import MB, store_size_bytes, write_ahead_log_bytes

# SQLite's own auto-checkpoint size (1000 pages of 4 KB): past it, the next commit would
# copy the log back itself.
CHECKPOINT_LOG_BYTES = 1000 * 4096


def promotions(report) -> int:
    """Facts this pass made servable (new or candidate/contested -> active)."""
    return sum(1 for c in report.changes if c.new.status == STATUS_ACTIVE
               and (c.old is None or c.old.status != STATUS_ACTIVE))


class Consolidator(ManagedMemoryNode):
    def __init__(self, **kwargs):
        super().__init__("consolidator", **kwargs)
        self.params = declare_parameters(self, "consolidator")
        self.config = RulesConfig.from_settings(self.params)
        self.partition = None
        self.guard = GrowthGuard(self.params["growth_limit_mb"])
        self.store_size = 0
        self.paused_passes = 0
        self.promoted_total = 0
        self.conflicts_total = 0
        self.passes = 0
        self.frozen = False
        self.overrides = 0
        self.refused_requests = 0  # over a field's size limit (request_limits)
        self.privacy_refused: Counter[str] = Counter()  # overrides refused, by category
        self.last_report = None
        self.last_error = ""
        self.compactions = 0  # retention compactions run by this node
        self.compaction_error = ""
        # What cannot be applied or published, each costing its own fact only: overrides
        # in the log not of their kind's shape (skipped by every pass), and facts left
        # out of `facts`. Each is logged once (_logged).
        self.ill_shaped = []
        self._logged: set[str] = set()
        self._archive_dir = Path(self.params["archive_dir"]) if self.params["archive_dir"] \
            else default_archive_dir(self.params["database_url"])
        self._snapshot = FactSnapshot()  # what `facts` carries, kept serialized
        self._run_event_id = 0  # the run the snapshot reflects
        self._snapshot_behind = False  # facts changed since `facts` last carried them
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
        self._load_snapshot()
        self._note_ill_shaped(ill_shaped_overrides(self.partition))

    def start(self, identity_hash: str) -> None:
        self._catch_up_snapshot()
        self.publish_snapshot()
        self.get_logger().info(f"consolidating every {self.params['period_s']} s "
                               f"(node clock), rules {self.config}")

    def release(self) -> None:
        partition, self.partition = self.partition, None
        self._snapshot.replace_all(())
        self._run_event_id = 0
        if partition is not None:
            partition.store.close()

    def on_pass_timer(self) -> None:
        self.run_pass()

    def on_poll_timer(self) -> None:
        """Run early when enough events wait (a cheap read of the chain head). Between
        passes, fold the write-ahead log back once it is past CHECKPOINT_LOG_BYTES:
        the logger's commits would otherwise do it (SQLite's auto-checkpoint), on the
        intake's path and in its process."""
        if not self.serving:
            return
        try:
            waiting, overrides = backlog(self.partition)
        except Exception as exc:  # the store is away (server restart, lock): poll again
            self.last_error = f"cannot read the store: {exc}"
            self.get_logger().warning(self.last_error, throttle_duration_sec=60.0)
            return
        if overrides or (waiting >= self.params["pass_after_new_events"]
                         and not self.frozen):
            self.run_pass()
        elif write_ahead_log_bytes(self.partition.store) > CHECKPOINT_LOG_BYTES:
            self._checkpoint_log()

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
            response.success, response.reason = False, self.last_error
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
        try:
            archive_path = ""
            if request.action == RESET_SEMANTIC:  # never outside the archive folder
                archive_path = str(archive_path_inside(
                    self._archive_dir, request.archive_path,
                    default_archive_path(self.partition).name))
            event = record_override(self.partition, request.action, operator.name,
                                    request.reason, self.get_clock().now().nanoseconds,
                                    fact_id=request.fact_id, kind=request.kind,
                                    key=request.key, value_json=request.value_json,
                                    confidence=request.confidence, archive_path=archive_path)
        except OverrideError as exc:
            response.reason = str(exc)
            return response
        except OverridePrivacyRefused as exc:  # logged as a privacy_rejection event
            self.privacy_refused[exc.finding.category] += 1
            self.get_logger().warning(f"override refused: {exc}")
            response.reason = str(exc)
            return response
        except Exception as exc:  # not logged (e.g. the store is away): said, not raised
            response.reason = f"not logged: {type(exc).__name__}: {exc}"
            return response
        self.overrides += 1
        self.get_logger().warning(f"override {request.action} by {operator.name!r} (key "
                                  f"{operator.key_id}, event {event.id}): {request.reason}")
        response.success, response.event_id = True, event.id
        report = self.run_pass()
        response.run_event_id = (report.run_event_id or 0) if report else 0
        if report is None:
            response.reason = f"logged; the pass that applies it failed: {self.last_error}"
        return response

    def run_pass(self, apply: bool = True):
        """One pass (or dry run); returns its report, or None if it failed or was paused
        (logged, and the reason kept in last_error)."""
        if not self.serving:
            return None
        try:
            self.store_size = store_size_bytes(self.partition.store)
        except Exception as exc:  # a failed measurement must not kill the node either
            self.last_error = f"cannot measure the store: {exc}"
            self.get_logger().error(self.last_error, throttle_duration_sec=60.0)
            return None
        if apply:
            self._compact_if_due()
        if apply and self.guard.state(self.store_size) != GROWTH_OK:
            self.paused_passes += 1
            self.last_error = self.guard.describe(self.store_size)
            self.get_logger().warning(f"pass paused: {self.last_error}",
                                      throttle_duration_sec=60.0)
            return None
        try:
            report = consolidation_pass(self.partition, self.config, apply=apply,
                                        stamp_ns=self.get_clock().now().nanoseconds)
        except ConcurrentPass as exc:
            self.last_error = str(exc)
            self.get_logger().warning(f"pass skipped: {exc}")
            return None
        except Exception as exc:  # a failed pass must not kill the node; the next one retries
            self.last_error = str(exc)
            self.get_logger().error(f"consolidation pass failed: {exc}")
            return None
        self.last_error = ""
        self.frozen = report.frozen
        self._note_ill_shaped(report.ill_shaped)
        for kind, key, why in report.fact_faults:
            self._warn_once(f"fact {kind} [{key}] not made by this pass (left as it was): "
                            f"{why}")
        if not report.applied:
            return report
        self.passes += 1
        self.last_report = report
        self.promoted_total += promotions(report)
        self.conflicts_total += len(report.conflicts)
        self.get_logger().info(report.summary())
        for conflict in report.conflicts:
            self.get_logger().warning(
                f"{conflict['event_kind']}: {conflict['fact_kind']} [{conflict['fact_key']}] "
                f"{conflict['status']['from']} -> {conflict['status']['to']}")
        self._publish_pass(report)
        self._checkpoint_log()
        release_freed_memory(WORTH_RELEASING_MB)  # what the pass read and rendered
        return report

    def _compact_if_due(self) -> None:
        """Retention: compact what consolidation folded beyond the newest retain_events
        positions, once compact_every_events of them wait. Before the growth guard's
        verdict, so a store at its limit still sheds its history."""
        retain = self.params["retain_events"]
        if not retain:
            return
        try:
            until = retention_due(self.partition, retain, self.params["compact_every_events"])
            if until is None:
                return
            report = compact(self.partition, until, self._archive_dir,
                             stamp_ns=self.get_clock().now().nanoseconds,
                             safety_reasons=frozenset(self.config.safety_failure_reasons))
        except Exception as exc:  # the store stays as it was; the next pass retries
            self.compaction_error = f"compaction failed: {exc}"
            self.get_logger().error(self.compaction_error, throttle_duration_sec=60.0)
            return
        self.compaction_error = ""
        if report.compaction is not None:
            self.compactions += 1
            self.get_logger().info(report.describe())
            self.store_size = store_size_bytes(self.partition.store)

    def _checkpoint_log(self) -> None:
        """Fold what the pass wrote back into the database file, now that its facts are
        out: SQLite maintenance, kept out of the pass (the store is held open with
        keep_open, so neither its commit nor its connection's close does it)."""
        try:
            self.partition.store.checkpoint_log()
        except Exception as exc:  # the next pass's checkpoint takes this one's pages too
            self.get_logger().warning(f"cannot checkpoint the store's log: {exc}",
                                      throttle_duration_sec=60.0)

    def _load_snapshot(self) -> None:
        """Every fact's encoding, kept so a pass only encodes the facts it changed."""
        run, facts = facts_at_checkpoint(self.partition)
        self._snapshot.replace_all(facts)
        self._run_event_id = run
        self._log_left_out()

    def _warn_once(self, text: str) -> None:
        if text not in self._logged:
            self._logged.add(text)
            self.get_logger().warning(text)

    def _note_ill_shaped(self, ill_shaped) -> None:
        """Keep and name (once each) the overrides passes skip: fact_schemas.py."""
        self.ill_shaped = list(ill_shaped)
        for skipped in self.ill_shaped:
            self._warn_once(f"ill-shaped operator fact skipped: {skipped.describe()}; "
                            "retract it with an override (docs/operations.md)")

    def _log_left_out(self) -> None:
        for (kind, key), why in self._snapshot.left_out.items():
            self._warn_once(f"fact {kind} [{key}] left out of the published facts: {why}")

    def _catch_up_snapshot(self) -> None:
        """Load the facts again if another process ran a pass while this node was
        inactive (`robot-memory consolidate`, a second consolidator)."""
        with self.partition.store.read() as conn:
            newest = read_checkpoint(self.partition, conn).run_event_id
        if newest != self._run_event_id:
            self._load_snapshot()

    def publish_snapshot(self) -> None:
        self.facts_publisher.publish(self._snapshot.message(
            self.partition.identity_hash, self._run_event_id or 0, 0,
            self.get_clock().now().to_msg()))
        self._snapshot_behind = False

    def _on_facts_matched(self, status) -> None:
        """A new `facts` subscriber: the middleware hands it the latched snapshot, which
        is older than the facts if passes ran while nobody listened; the current one
        follows it. (Transient local: it reaches the reader even if the reader has not
        yet discovered this writer.)"""
        if status.current_count_change > 0 and self._snapshot_behind and self.serving:
            self.publish_snapshot()

    def _publish_pass(self, report) -> None:
        """After a pass: refresh the changed facts, publish the delta, then the snapshot."""
        previous = report.previous_run_event_id
        if previous != self._run_event_id:  # another process ran a pass in between
            self._load_snapshot()
        changed = facts_written(self.partition, report.changes)
        self._run_event_id = report.run_event_id
        self.delta_publisher.publish(self._snapshot.delta(
            changed, self.partition.identity_hash, self._run_event_id or 0, previous or 0,
            self.get_clock().now().to_msg()))
        if self._snapshot.left_out:
            self._log_left_out()
        if self.facts_publisher.get_subscription_count() > 0:
            self.publish_snapshot()
        else:
            self._snapshot_behind = True

    def _publish_diagnostics(self) -> None:
        report = self.last_report
        values = {"passes": self.passes, "identity_hash": self.gate.identity_hash or "",
                  "memory_integrity_status": self.gate.state_name,
                  "knowledge_promoted": str(bool(report and promotions(report))).lower(),
                  "knowledge_conflict_detected": str(bool(report and report.conflicts)).lower(),
                  "memory_write_performed": str(bool(report and report.facts_touched)).lower(),
                  "promoted_total": self.promoted_total,
                  "conflicts_total": self.conflicts_total,
                  "paused_passes": self.paused_passes,
                  "frozen": str(self.frozen).lower(), "overrides": self.overrides,
                  "refused_requests": self.refused_requests,
                  **{f"refused.privacy_{category}": n
                     for category, n in sorted(self.privacy_refused.items())},
                  "compactions": self.compactions, "archive_dir": str(self._archive_dir),
                  "store_size_mb": round(self.store_size / MB, 3),
                  "ill_shaped_operator_facts": len(self.ill_shaped),
                  "facts_left_out": len(self._snapshot.left_out),
                  **self.credentials.diagnostic_values()}
        values.update({f"ill_shaped.event_{s.event_id}": f"{s.kind} [{s.key}] {s.problem}"
                       for s in self.ill_shaped})
        values.update({f"left_out.{kind} [{key}]": why
                       for (kind, key), why in self._snapshot.left_out.items()})
        if report is not None:
            values.update({"last_pass_duration_ms": round(report.duration_s * 1000, 3),
                           "last_pass_events_read": report.events_read,
                           "last_pass_facts_touched": report.facts_touched,
                           "last_pass_skipped": sum(report.skipped.values()),
                           "last_pass_conflicts": len(report.conflicts),
                           "rule_version": report.rule_version})
            if report.upgrade_available:  # the store keeps the version it was built with
                values["rule_upgrade_available"] = report.upgrade_available
            values.update({f"last_pass_skipped.{reason}": n
                           for reason, n in report.skipped.items()})
        if not self.serving:
            level, message = WARN, f"inactive: {self.inactive_reason}"
        elif self.guard.state(self.store_size) != GROWTH_OK:
            level, message = WARN, self.guard.describe(self.store_size)
        elif self.last_error:
            level, message = ERROR, f"last pass failed: {self.last_error}"
        elif self.compaction_error:
            level, message = ERROR, f"{self.compaction_error} (the live store is unchanged)"
        elif self.frozen:
            level, message = WARN, "consolidation FROZEN by an operator (override unfreeze)"
        elif self.ill_shaped:
            level, message = WARN, (f"ill-shaped operator facts skipped: {len(self.ill_shaped)}"
                                    " (retract with an override; see the log)")
        elif self._snapshot.left_out:
            level, message = WARN, (f"facts left out of the published facts: "
                                    f"{len(self._snapshot.left_out)} (see the log)")
        else:
            level, message = OK, "consolidating"
        self.diagnostics.publish(level, message, values)


def node_spec() -> NodeSpec:
    return NodeSpec(Consolidator)


def main(args=None) -> None:
    run_node(node_spec(), args)


if __name__ == "__main__":
    main(sys.argv)

"""The consolidator's pass policy, ROS-free: when a pass runs, when history is
compacted, what a pass publishes and what it leaves out, the disk budget and the growth
guard's pauses, and the counts and status /diagnostics shows.

The consolidator node (ros/consolidator.py) wires parameters, timers, services and topics
to a ConsolidationService, as the logger node does with intake/ingest.py: on configure it
opens the store and `attach`es the identity's partition, on cleanup it `detach`es it;
its timers call `run_pass` and `poll`, its services `run_pass` and `override`; the
`publish` callback it gives turns a pass's FactsUpdate into `facts_delta` (and `facts`)
messages. The node calls only while it is active: passes never overlap within a process
(its one callback group), and ConcurrentPass keeps them apart across processes.

The service lives as long as the node, so its counts span configurations.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robot_memory.consolidation.changes import facts_written
from robot_memory.consolidation.checkpoint import (backlog, facts_at_checkpoint,
                                                   ill_shaped_overrides, read_checkpoint)
from robot_memory.consolidation.consolidation_pass import (ConcurrentPass, PassReport,
                                                           consolidation_pass)
from robot_memory.consolidation.override_plan import IllShaped
from robot_memory.consolidation.overrides import (RESET_SEMANTIC, OverrideError,
                                                  OverridePrivacyRefused, default_archive_path,
                                                  record_override)
from robot_memory.consolidation.reset_archive import archive_path_inside
from robot_memory.consolidation.rules import STATUS_ACTIVE, RulesConfig
from robot_memory.operation.heap import WORTH_RELEASING_MB, release_freed_memory
from robot_memory.operation.log_throttle import LogThrottle
from robot_memory.retention.budget import PARTS as DISK_PARTS
from robot_memory.retention.budget import BudgetOutcome, hold_budget
from robot_memory.retention.compaction import compact, default_archive_dir, retention_due
from robot_memory.retention.destinations import destination_from_url, without_password
from robot_memory.retention.growth import OK as GROWTH_OK
from robot_memory.retention.growth import GrowthGuard
from robot_memory.retention.shipping import Shipper
from robot_memory.store import FactRow, Partition
from robot_memory.store.size import MB, store_size_bytes, write_ahead_log_bytes

# SQLite's own auto-checkpoint size (1000 pages of 4 KB): past it, the next commit would
# copy the log back itself.
CHECKPOINT_LOG_BYTES = 1000 * 4096

# Levels of `status`, mapped by the node onto /diagnostics' own.
OK, WARN, ERROR = "ok", "warn", "error"

# A failure that repeats on every timer tick (the store away, a store over its limit) is
# logged at most once per this many seconds, per place it happens.
REPEAT_LOG_PERIOD_S = 60.0

Log = Callable[[str, str], None]  # (level "warning" | "error" | "info", text)


def _default_log(level: str, text: str) -> None:
    getattr(logging.getLogger("robot_memory.consolidation.service"), level)(text)


def promotions(report: PassReport) -> int:
    """Facts this pass made servable (new or candidate/contested -> active)."""
    return sum(1 for c in report.changes if c.new.status == STATUS_ACTIVE
               and (c.old is None or c.old.status != STATUS_ACTIVE))


@dataclass(frozen=True, slots=True)
class FactsUpdate:
    """What an applied pass gives the facts topics: the facts it wrote (`changed`, the
    delta) as of run `run_event_id`, following run `previous_run_event_id`. `reloaded`
    is every fact, when the facts the node holds are older than the run this pass built
    on (another process ran a pass in between): they are replaced before the delta."""

    changed: list[FactRow]
    run_event_id: int
    previous_run_event_id: int
    reloaded: list[FactRow] | None = None


@dataclass(frozen=True, slots=True)
class OverrideOutcome:
    """What became of an override request: logged (`event_id`) and applied by the pass
    `run_event_id` (0: none), or refused, with the reason."""

    success: bool
    reason: str = ""
    event_id: int = 0
    run_event_id: int = 0


@dataclass(slots=True)
class _Counts:
    passes: int = 0
    paused_passes: int = 0
    promoted_total: int = 0
    conflicts_total: int = 0
    overrides: int = 0
    compactions: int = 0  # retention compactions run by this service
    budget_paused_passes: int = 0  # of paused_passes: the disk budget could not be held
    forgotten_by_budget: int = 0  # segments the disk budget's policy forgot
    privacy_refused: Counter[str] = field(default_factory=Counter)  # overrides, by category


class ConsolidationService:
    """Passes over one identity's partition, with retention, the disk budget and the
    growth guard.

    `publish(update)` is called after each applied pass, before the store's write-ahead
    log is folded back. `log(level, text)` says what happened (a repeated failure at
    most once per REPEAT_LOG_PERIOD_S); `now_ns()` stamps passes, compactions and
    overrides (the node's clock, so sim time is honoured)."""

    def __init__(self, config: RulesConfig, *, archive_dir: Path, growth_limit_mb: float = 0.0,
                 retain_events: int = 0, compact_every_events: int = 0,
                 pass_after_new_events: int = 0, disk_budget_mb: float = 0.0,
                 shipping_configured: bool = False, witness_path: str | Path = "",
                 shipper: Shipper | None = None,
                 publish: Callable[[FactsUpdate], None] = lambda update: None,
                 log: Log = _default_log, now_ns: Callable[[], int] = time.time_ns):
        self.config = config
        self.archive_dir = Path(archive_dir)
        self.guard = GrowthGuard(growth_limit_mb)
        self.retain_events = retain_events
        self.compact_every_events = compact_every_events
        self.pass_after_new_events = pass_after_new_events
        self.disk_budget_mb = disk_budget_mb
        # With a fleet store configured, a segment is deleted under the budget only once
        # its shipment's receipt is in the log (retention/budget.py).
        self.shipping_configured = shipping_configured or shipper is not None
        self.witness_path = witness_path
        self.shipper = shipper  # None: no fleet store configured
        self._publish = publish
        self._log = log
        self._now_ns = now_ns
        self._repeats = LogThrottle(REPEAT_LOG_PERIOD_S)
        self.partition: Partition | None = None
        self.counts = _Counts()
        self.store_size = 0
        self.frozen = False
        self.last_report: PassReport | None = None
        self.last_error = ""  # why the last pass did not run or failed ("" when it ran)
        self.compaction_error = ""
        self.budget: BudgetOutcome | None = None  # the last check of the disk budget
        self.budget_problem = ""  # why learning is paused for the disk budget ("": it is not)
        self.budget_error = ""  # why the budget could not be checked ("": it was)
        # What cannot be applied or published, each costing its own fact only: overrides
        # in the log not of their kind's shape (skipped by every pass), and facts a pass
        # could not make. Each is logged once (warn_once).
        self.ill_shaped: list[IllShaped] = []
        self._warned: set[str] = set()
        self.facts_run_event_id = 0  # the run the facts last handed out reflect
        self.snapshot_behind = False  # facts changed since the whole snapshot went out

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any], **kwargs) -> ConsolidationService:
        """From the consolidator's parameters (robot_memory/operation/parameters.yaml);
        segments go to archive_dir, or beside the database (default_archive_dir). A
        fleet store to ship segments to is configured when `fleet_store_url` is set."""
        archive_dir = Path(params["archive_dir"]) if params["archive_dir"] \
            else default_archive_dir(params["database_url"])
        shipper = None
        if params.get("fleet_store_url"):
            url = params["fleet_store_url"]
            shipper = Shipper(destination_from_url(url), archive_dir,
                              backoff_cap_s=params["fleet_backoff_cap_s"],
                              time_limit_s=params["fleet_ship_time_limit_s"],
                              seed=without_password(url))  # robots' retries spread apart
        return cls(RulesConfig.from_settings(dict(params)), archive_dir=archive_dir,
                   growth_limit_mb=params["growth_limit_mb"],
                   retain_events=params["retain_events"],
                   compact_every_events=params["compact_every_events"],
                   pass_after_new_events=params["pass_after_new_events"],
                   disk_budget_mb=params["disk_budget_mb"],
                   shipping_configured=bool(params.get("fleet_store_url")),
                   witness_path=params["witness_file"], shipper=shipper, **kwargs)

    # -- the partition: attached on configure, detached on cleanup --------------------
    def attach(self, partition: Partition) -> list[FactRow]:
        """Take the partition the passes run on; return its facts (the snapshot to
        publish), and name the overrides no pass can apply."""
        self.partition = partition
        facts = self.load_facts()
        self._note_ill_shaped(ill_shaped_overrides(partition))
        return facts

    def detach(self) -> Partition | None:
        """Let go of the partition (the caller closes its store)."""
        partition, self.partition = self.partition, None
        self.facts_run_event_id = 0
        return partition

    def load_facts(self) -> list[FactRow]:
        """Every fact at the newest run, which the facts handed out now reflect."""
        run, facts = facts_at_checkpoint(self.partition)
        self.facts_run_event_id = run
        return facts

    def facts_if_stale(self) -> list[FactRow] | None:
        """Every fact again if another process ran a pass since they were last read
        (`robot-memory consolidate`, a second consolidator), else None."""
        with self.partition.store.read() as conn:
            newest = read_checkpoint(self.partition, conn).run_event_id
        return self.load_facts() if newest != self.facts_run_event_id else None

    # -- the whole snapshot: out after a pass only while someone listens ---------------
    def snapshot_after_pass(self, subscribers: int) -> bool:
        """Whether the whole snapshot goes out after this pass: only to subscribers;
        with none it waits for the next one to match (it is large, and framing it after
        every pass would hold the interpreter that answers `ground` in one process)."""
        if subscribers > 0:
            return True
        self.snapshot_behind = True
        return False

    def snapshot_on_match(self, subscribers_added: int) -> bool:
        """A subscriber matched: the latched snapshot it gets is older than the facts
        when passes ran while nobody listened, so the current one follows it."""
        return subscribers_added > 0 and self.snapshot_behind

    def snapshot_published(self) -> None:
        self.snapshot_behind = False

    # -- passes -------------------------------------------------------------------------
    def poll(self) -> PassReport | None:
        """A cheap look at the chain head: a pass when an override waits, or when
        pass_after_new_events results do (unless frozen); else, once the write-ahead log
        is past CHECKPOINT_LOG_BYTES, fold it back, so the logger's commits do not (SQLite's
        auto-checkpoint, on the intake's path and in its process)."""
        if self.partition is None:
            return None
        try:
            waiting, overrides = backlog(self.partition)
        except Exception as exc:  # the store is away (server restart, lock): poll again
            self.last_error = f"cannot read the store: {exc}"
            self._log_repeated("poll", "warning", self.last_error)
            return None
        if overrides or (waiting >= self.pass_after_new_events and not self.frozen):
            return self.run_pass()
        if write_ahead_log_bytes(self.partition.store) > CHECKPOINT_LOG_BYTES:
            self._checkpoint_log()
        return None

    def run_pass(self, apply: bool = True) -> PassReport | None:
        """One pass (or dry run); its report, or None if it failed or was paused (logged,
        and the reason kept in last_error). Before an applied pass, retention compacts
        what is due and the disk budget is held; when it cannot be, or past the growth
        limit, the pass is paused (counted)."""
        if self.partition is None:
            return None
        try:
            self.store_size = store_size_bytes(self.partition.store)
        except Exception as exc:  # a failed measurement must not stop the passes either
            self.last_error = f"cannot measure the store: {exc}"
            self._log_repeated("measure", "error", self.last_error)
            return None
        if apply:
            self._compact_if_due()
            # Shipped before the budget is held: a receipt makes its segment the first
            # the budget may forget.
            self._ship_if_due()
            if not self._hold_budget():
                self.counts.paused_passes += 1
                self.counts.budget_paused_passes += 1
                self.last_error = f"disk budget exceeded, learning paused: {self.budget_problem}"
                self._log_repeated("budget", "warning", f"pass paused: {self.last_error}")
                return None
        if apply and self.guard.state(self.store_size) != GROWTH_OK:
            self.counts.paused_passes += 1
            self.last_error = self.guard.describe(self.store_size)
            self._log_repeated("paused", "warning", f"pass paused: {self.last_error}")
            return None
        try:
            report = consolidation_pass(self.partition, self.config, apply=apply,
                                        stamp_ns=self._now_ns())
        except ConcurrentPass as exc:
            self.last_error = str(exc)
            self._log("warning", f"pass skipped: {exc}")
            return None
        except Exception as exc:  # a failed pass must not stop the passes; the next retries
            self.last_error = str(exc)
            self._log("error", f"consolidation pass failed: {exc}")
            return None
        self.last_error = ""
        self.frozen = report.frozen
        self._note_ill_shaped(report.ill_shaped)
        for kind, key, why in report.fact_faults:
            self.warn_once(f"fact {kind} [{key}] not made by this pass (left as it was): "
                           f"{why}")
        if not report.applied:
            return report
        self.counts.passes += 1
        self.last_report = report
        self.counts.promoted_total += promotions(report)
        self.counts.conflicts_total += len(report.conflicts)
        self._log("info", report.summary())
        for conflict in report.conflicts:
            self._log("warning",
                      f"{conflict['event_kind']}: {conflict['fact_kind']} "
                      f"[{conflict['fact_key']}] {conflict['status']['from']} -> "
                      f"{conflict['status']['to']}")
        self._publish(self._facts_update(report))
        self._checkpoint_log()
        release_freed_memory(WORTH_RELEASING_MB)  # what the pass read and rendered
        return report

    def _facts_update(self, report: PassReport) -> FactsUpdate:
        previous = report.previous_run_event_id
        reloaded = self.load_facts() if previous != self.facts_run_event_id else None
        changed = facts_written(self.partition, report.changes)
        self.facts_run_event_id = report.run_event_id
        return FactsUpdate(changed, report.run_event_id or 0, previous or 0, reloaded)

    def _compact_if_due(self) -> None:
        """Retention: compact what consolidation folded beyond the newest retain_events
        positions, once compact_every_events of them wait. Before the growth guard's
        verdict, so a store at its limit still sheds its history."""
        if not self.retain_events:
            return
        try:
            until = retention_due(self.partition, self.retain_events,
                                  self.compact_every_events)
            if until is None:
                return
            report = compact(self.partition, until, self.archive_dir, stamp_ns=self._now_ns(),
                             safety_reasons=frozenset(self.config.safety_failure_reasons))
        except Exception as exc:  # the store stays as it was; the next pass retries
            self.compaction_error = f"compaction failed: {exc}"
            self._log_repeated("compaction", "error", self.compaction_error)
            return
        self.compaction_error = ""
        if report.compaction is not None:
            self.counts.compactions += 1
            self._log("info", report.describe())
            self.store_size = store_size_bytes(self.partition.store)

    def _hold_budget(self) -> bool:
        """The disk budget (retention/budget.py), after the compaction: measure what
        memory keeps on the disk, forget what the policy says (each logged), and say
        whether the budget holds. A check that fails is said (ERROR) and does not pause
        the passes: the next pass checks again."""
        try:
            self.budget = hold_budget(
                self.partition, self.archive_dir, int(self.disk_budget_mb * MB),
                shipping_configured=self.shipping_configured,
                witness_path=self.witness_path or None, stamp_ns=self._now_ns())
        except Exception as exc:  # the store or the folder is away: said, retried
            self.budget_error = f"disk budget check failed: {exc}"
            self._log_repeated("budget_check", "error", self.budget_error)
            return True
        self.budget_error = ""
        for deletion in self.budget.forgotten:
            self.counts.forgotten_by_budget += 1
            self._log("warning", f"segment {deletion.segment.segment} forgotten "
                                 f"({deletion.reason}): the disk budget "
                                 f"{self.disk_budget_mb:g} MB was exceeded")
        self.budget_problem = self.budget.diagnosis(self.shipping_configured)
        if self.budget.forgotten:
            self.store_size = store_size_bytes(self.partition.store)
        return self.budget.held

    def _ship_if_due(self) -> None:
        """Ship the segments without a receipt to the fleet store, unless a failed round's
        backoff has not passed: a round is bounded by its time limit, and a failure only
        delays the next round (the pass runs either way)."""
        if self.shipper is None:
            return
        shipped = self.shipper.run(self.partition, self._now_ns)
        if shipped is None:
            return
        for receipt in shipped.shipped:
            self._log("info", f"segment {receipt.segment} shipped to {receipt.destination} "
                              f"({receipt.size_bytes} bytes, SHA-256 confirmed; receipt seq "
                              f"{receipt.seq})")
        if shipped.error:
            self._log_repeated("shipping", "warning",
                               f"shipping to the fleet store failed: {shipped.error}; "
                               f"{shipped.pending} segment(s) pending, retry in "
                               f"{self.shipper.retry_in_s():.0f} s")

    def close(self) -> None:
        """Let go of the fleet store's connections (the node's shutdown)."""
        if self.shipper is not None:
            self.shipper.destination.close()

    def _checkpoint_log(self) -> None:
        """Fold what the pass wrote back into the database file, now that its facts are
        out: SQLite maintenance, kept out of the pass (the store is held open, so neither
        its commit nor its connection's close does it)."""
        try:
            self.partition.store.checkpoint_log()
        except Exception as exc:  # the next pass's checkpoint takes this one's pages too
            self._log_repeated("checkpoint", "warning",
                               f"cannot checkpoint the store's log: {exc}")

    # -- overrides ----------------------------------------------------------------------
    def override(self, action: str, operator: str, key_id: str, reason: str, *,
                 fact_id: int = 0, kind: str = "", key: str = "", value_json: str = "",
                 confidence: float = 1.0, archive_path: str = "") -> OverrideOutcome:
        """Log an operator's override (the caller has checked who it is), then apply it
        with a pass at once. A reset's archive goes inside archive_dir, never elsewhere."""
        if self.partition is None:
            return OverrideOutcome(False, "not logged: no store attached")
        try:
            if action == RESET_SEMANTIC:
                archive_path = str(archive_path_inside(
                    self.archive_dir, archive_path,
                    default_archive_path(self.partition).name))
            else:
                archive_path = ""
            event = record_override(self.partition, action, operator, reason, self._now_ns(),
                                    fact_id=fact_id, kind=kind, key=key,
                                    value_json=value_json, confidence=confidence,
                                    archive_path=archive_path)
        except OverrideError as exc:
            return OverrideOutcome(False, str(exc))
        except OverridePrivacyRefused as exc:  # logged as a privacy_rejection event
            self.counts.privacy_refused[exc.finding.category] += 1
            self._log("warning", f"override refused: {exc}")
            return OverrideOutcome(False, str(exc))
        except Exception as exc:  # not logged (e.g. the store is away): said, not raised
            return OverrideOutcome(False, f"not logged: {type(exc).__name__}: {exc}")
        self.counts.overrides += 1
        self._log("warning", f"override {action} by {operator!r} (key {key_id}, event "
                             f"{event.id}): {reason}")
        report = self.run_pass()
        if report is None:
            return OverrideOutcome(True, "logged; the pass that applies it failed: "
                                   f"{self.last_error}", event.id, 0)
        return OverrideOutcome(True, "", event.id, report.run_event_id or 0)

    # -- what it logs once, and what /diagnostics shows ---------------------------------
    def warn_once(self, text: str) -> None:
        """A warning logged the first time only (what costs one fact, named once)."""
        if text not in self._warned:
            self._warned.add(text)
            self._log("warning", text)

    def _note_ill_shaped(self, ill_shaped: Iterable[IllShaped]) -> None:
        """Keep and name (once each) the overrides passes skip: fact_schemas.py."""
        self.ill_shaped = list(ill_shaped)
        for skipped in self.ill_shaped:
            self.warn_once(f"ill-shaped operator fact skipped: {skipped.describe()}; "
                           "retract it with an override (docs/operations.md)")

    def _log_repeated(self, where: str, level: str, text: str) -> None:
        if self._repeats.admit(where) is not None:
            self._log(level, text)

    def diagnostic_values(self) -> dict[str, Any]:
        """The pass counts and the last pass's figures, by /diagnostics key."""
        report, counts = self.last_report, self.counts
        values = {"passes": counts.passes,
                  "knowledge_promoted": str(bool(report and promotions(report))).lower(),
                  "knowledge_conflict_detected": str(bool(report and report.conflicts)).lower(),
                  "memory_write_performed": str(bool(report and report.facts_touched)).lower(),
                  "promoted_total": counts.promoted_total,
                  "conflicts_total": counts.conflicts_total,
                  "paused_passes": counts.paused_passes,
                  "frozen": str(self.frozen).lower(), "overrides": counts.overrides,
                  **{f"refused.privacy_{category}": n
                     for category, n in sorted(counts.privacy_refused.items())},
                  "compactions": counts.compactions, "archive_dir": str(self.archive_dir),
                  "store_size_mb": round(self.store_size / MB, 3),
                  "ill_shaped_operator_facts": len(self.ill_shaped),
                  "disk_budget_mb": self.disk_budget_mb,
                  "disk_budget_paused_passes": counts.budget_paused_passes,
                  "segments_forgotten_by_budget": counts.forgotten_by_budget}
        values.update(self._disk_values())
        if self.shipper is not None:
            values.update(self.shipper.diagnostic_values())
        values.update({f"ill_shaped.event_{s.event_id}": f"{s.kind} [{s.key}] {s.problem}"
                       for s in self.ill_shaped})
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
        return values

    def _disk_values(self) -> dict[str, Any]:
        """Each part of the footprint (MB) as of the last check, and the share of the
        budget in use (with a budget)."""
        if self.budget is None:
            return {}
        footprint = self.budget.footprint
        values: dict[str, Any] = {f"disk.{part}_mb": round(footprint.parts.get(part, 0) / MB, 3)
                                  for part in DISK_PARTS}
        values.update({"disk.total_mb": round(footprint.total / MB, 3),
                       "disk.segments": len(footprint.segments),
                       "disk.segments_not_shipped": sum(
                           1 for s in footprint.segments if not s.shipped)})
        if self.disk_budget_mb:
            values["disk_budget_used"] = round(footprint.total / (self.disk_budget_mb * MB), 4)
        return values

    def status(self, facts_left_out: int = 0) -> tuple[str, str]:
        """(OK, WARN or ERROR, message) of an active consolidator, the gravest first;
        `facts_left_out`: facts the node could not put into messages."""
        if self.guard.state(self.store_size) != GROWTH_OK:
            return WARN, self.guard.describe(self.store_size)
        if self.budget_problem:
            return WARN, f"disk budget exceeded, learning paused: {self.budget_problem}"
        if self.last_error:
            return ERROR, f"last pass failed: {self.last_error}"
        if self.compaction_error:
            return ERROR, f"{self.compaction_error} (the live store is unchanged)"
        if self.budget_error:
            return ERROR, f"{self.budget_error} (passes go on; checked again each pass)"
        if self.shipper is not None and self.shipper.last_error:
            return WARN, (f"shipping to the fleet store failing: {self.shipper.pending} "
                          f"segment(s) pending, retry in {self.shipper.retry_in_s():.0f} s "
                          "(nothing unshipped is pruned; see shipping_last_error)")
        if self.frozen:
            return WARN, "consolidation FROZEN by an operator (override unfreeze)"
        if self.ill_shaped:
            return WARN, (f"ill-shaped operator facts skipped: {len(self.ill_shaped)}"
                          " (retract with an override; see the log)")
        if facts_left_out:
            return WARN, (f"facts left out of the published facts: {facts_left_out} "
                          "(see the log)")
        return OK, "consolidating"

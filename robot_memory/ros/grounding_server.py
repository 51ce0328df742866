"""grounding_server: the planner-facing `ground` service (GroundingQuery), read-only.

Answers from an in-memory GroundingIndex: loaded from the store when the node is
configured, then patched with each pass's `facts_delta` and swapped in with one
assignment (while inactive too, so it is current when the node is activated again). A
delta that does not follow the run the index reflects means one was missed: the index
is reloaded from the store (off the request path). No database query
happens on the request path; every consultation is audited by a background writer.
Requests that allow analogies may be answered ANALOGY from the same index
(docs/analogies.md; parameters analogies_enabled, analogy_max_distance, analogy_k), and
requests that allow priors get the fleet's evidence, read from priors_sources when the
node is configured (docs/priors.md). Only while the node is active does `ground` answer
from the index (and audit the answer); otherwise it answers IDENTITY_UNVERIFIED.
"""

from __future__ import annotations

import gc
import sys
import threading

from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException

from robot_memory.grounding.analogies import AnalogySettings
from robot_memory.grounding.audit import AuditWriter, audited_number, consultation_payload
from robot_memory.canonical import canonical_json
from robot_memory.consolidation.checkpoint import read_checkpoint
from robot_memory.grounding.delta_watch import LostDeltaWatch
from robot_memory.event_kinds import FACT_CONSULTATION
from robot_memory.grounding import limits as request_limits
from robot_memory.grounding.limits import clipped, over_limit
from robot_memory.errors import InputError
from robot_memory.grounding.index import GroundingIndex
from robot_memory.grounding.request import (ANALOGY, IDENTITY_UNVERIFIED, PRIOR,
                                            REASON_IDENTITY_UNVERIFIED, GroundingAnswer, invalid)
from robot_memory.manifest import load_manifest
from robot_memory.grounding.priors import EMPTY_PRIORS, PriorIndex, PriorSettings
from robot_memory.grounding.priors_sources import load_priors
from robot_memory.msg import SemanticFactArray
from robot_memory.ros.conversions import (analogy_to_msg, fact_array_from_serialized, fact_to_msg,
                                          grounding_request_from_msg, prior_to_msg)
from robot_memory.ros.diagnostics import OK as DIAG_OK
from robot_memory.ros.diagnostics import WARN, DiagnosticsPublisher
from robot_memory.ros.fact_messages import AnswerMemo, ConsultationIds, FactMessages
from robot_memory.operation.heap import release_freed_memory
from robot_memory.ros.managed_node import ManagedMemoryNode
from robot_memory.ros.params import declare_parameters
from robot_memory.ros.spin import NodeSpec, run_node
from robot_memory.ros.qos import FACTS_DELTA_QOS
from robot_memory.ros.side_executor import MainExecutor, RequestCallbackGroup, SideExecutor
from robot_memory.grounding.explain import (FactNotFound, explain_fact, find_fact,
                                            format_explanation)
from robot_memory.srv import ExplainFact, GroundingQuery
from robot_memory.store import MemoryStore, NewEvent


# 0.1 ms: at 1,000 results/s with a pass every second, three runs each gave one-process
# p99 1.05-1.16x the echo against 1.19-1.25x at 0.5 ms, for no CPU that two runs could
# tell apart (docs/performance.md, Grounding).
REQUEST_GIL_WAIT_S = 0.0001


class GroundingServer(ManagedMemoryNode):
    """The `ground` service alone on the main single-threaded executor, in a
    RequestCallbackGroup: nothing else ever runs ahead of a request, nor is waited on
    with it. Everything else (index refreshes from `facts_delta`, `explain`, diagnostics,
    the lifecycle transitions and parameters) is this node's too (`ros2 node info` lists
    them), spun by a SideExecutor in another thread."""

    def __init__(self, **kwargs):
        super().__init__("grounding_server", **kwargs)
        self.params = declare_parameters(self, "grounding_server")
        self.analogy_settings = AnalogySettings(
            enabled=self.params["analogies_enabled"],
            max_distance=self.params["analogy_max_distance"], k=self.params["analogy_k"])
        self.index: GroundingIndex | None = None
        self.partition = None
        self.run_event_id = 0
        self.reloads = 0
        self._lost_deltas = LostDeltaWatch()
        self.audit: AuditWriter | None = None
        self.answers = 0
        self.analogy_answers = 0  # answered ANALOGY: facts lent, not the robot's own
        self.prior_answers = 0  # answered PRIOR: the fleet's evidence, not the robot's own
        self.priors = EMPTY_PRIORS
        self.priors_refused: list[str] = []  # why each refused priors source was refused
        self.refused_requests = 0  # over a field's size limit (request_limits)
        self.refused_deltas = 0  # facts_delta bytes that were no SemanticFactArray
        self._logged_left_out: set[tuple[str, str, str]] = set()
        self._index_lock = threading.Lock()  # one writer of self.index at a time
        self._fact_messages = FactMessages()  # the `ground` handler's own
        self._consultation_ids = ConsultationIds()
        self._answers = AnswerMemo()  # the `ground` handler's own
        self.create_service(GroundingQuery, "ground", self.on_ground_request,
                            callback_group=RequestCallbackGroup())
        self.create_subscription(SemanticFactArray, "facts_delta", self.on_facts_delta,
                                 FACTS_DELTA_QOS, raw=True)
        self.create_service(ExplainFact, "explain", self.on_explain_request)
        self.diagnostics = DiagnosticsPublisher(self)
        self.create_timer(self.params["diagnostics_period_s"], self._publish_diagnostics,
                          clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._side_executor = SideExecutor(self)
        self._side_thread = threading.Thread(target=self._spin_side, name="grounding_index",
                                             daemon=True)
        self._side_thread.start()

    def _spin_side(self) -> None:
        try:
            self._side_executor.spin()
        except ExternalShutdownException:  # the process is stopping: nothing to report
            pass

    def acquire(self, identity_hash: str) -> None:
        """The store, the consultation audit writer, the fleet priors and the index."""
        partition = MemoryStore(self.params["database_url"]).partition(identity_hash)
        self.partition = partition
        self.require_verified_store(partition.store)
        self.audit = AuditWriter(partition, self.params["audit_queue_size"],
                                 self.params["audit_flush_period_s"])
        self.priors = self._load_priors(identity_hash)
        self._reload()

    def start(self, identity_hash: str) -> None:
        self.get_logger().info(f"serving 'ground' from {self.index.size} facts")

    def release(self) -> None:
        """Flush what was answered into the audit, then let go of the index and the store
        (under the index lock: a reload in the side thread must not bring it back)."""
        with self._index_lock:
            partition, self.partition = self.partition, None
            self.index = None
        self.priors, self.priors_refused = EMPTY_PRIORS, []
        audit, self.audit = self.audit, None
        if audit is not None:
            audit.close()
        if partition is not None:
            partition.store.close()

    def _load_priors(self, identity_hash: str) -> PriorIndex:
        """The fleet's facts from priors_sources, each source checked against this
        robot's embodiment, read from the manifest the verifier verified."""
        settings = PriorSettings(max_weight=self.params["prior_max_weight"])
        sources = list(self.params["priors_sources"])
        self.priors_refused = []
        priors = PriorIndex((), settings)
        if not sources:
            return priors
        try:
            manifest = load_manifest(self.gate.manifest_path)
            if manifest.identity_hash() != identity_hash:
                raise InputError(f"manifest {self.gate.manifest_path} no longer hashes to "
                                 f"the verified identity {identity_hash}")
        except InputError as exc:
            self.priors_refused = [f"every priors source: this robot's embodiment is "
                                   f"unknown: {exc}"]
        else:
            loaded = load_priors(sources, identity_hash, manifest.embodiment)
            self.priors_refused = loaded.refused
            priors = PriorIndex(loaded.facts, settings)
            self.get_logger().info(f"priors: {priors.size} facts of {len(priors.identities)} "
                                   f"robot(s) of embodiment {manifest.embodiment!r}")
        for why in self.priors_refused:
            self.get_logger().error(f"priors source refused: {why}")
        return priors

    def _reload(self) -> None:
        with self._index_lock:
            partition = self.partition
            if partition is None:  # released (cleanup) since this reload was asked for
                return
            with partition.store.read() as conn:
                self.run_event_id = read_checkpoint(partition, conn).run_event_id
                facts = partition.facts(conn=conn)
            index = GroundingIndex(partition.identity_hash, facts)
            if self.analogy_settings.enabled:  # built here, not by the first request
                index.known_properties()
            self.index = index
            self.reloads += 1
            del facts
        self._log_left_out(index)
        release_freed_memory()  # the rows the index was built from
        # The index is long-lived: keep the cyclic collector from re-scanning it.
        gc.freeze()

    def on_facts_delta(self, data: bytes) -> None:
        """A pass's delta, taken as bytes and read into FactRows in this thread
        (conversions.fact_array_from_serialized): rclpy's deserialization would hold the
        interpreter for the whole delta while `ground` requests wait."""
        current = self.index
        if current is None:
            return
        try:
            delta = fact_array_from_serialized(data, self.diagnostics.fast_path_off)
        except Exception as exc:  # not a SemanticFactArray: the catch-up reloads if needed
            self.refused_deltas += 1
            self.get_logger().warning(f"refused a facts delta of {len(data)} bytes: {exc}",
                                      throttle_duration_sec=60.0)
            return
        if delta.identity_hash != current.identity_hash:
            return
        if delta.run_event_id <= self.run_event_id:
            return  # already reflected (e.g. loaded from the store after this pass)
        if delta.previous_run_event_id != self.run_event_id:
            self.get_logger().warning(f"missed a facts delta (have run {self.run_event_id}, "
                                      f"delta follows {delta.previous_run_event_id}); "
                                      "reloading")
            self._reload()
            return
        with self._index_lock:
            if self.index is current:
                self.index = current.with_changes(delta.facts)
                self.run_event_id = delta.run_event_id
        if self.index.left_out:
            self._log_left_out(self.index)

    def _log_left_out(self, index: GroundingIndex) -> None:
        """Name each fact the index left out (fact_schemas.py), once per process."""
        for (kind, key), why in index.left_out.items():
            if (kind, key, why) not in self._logged_left_out:
                self._logged_left_out.add((kind, key, why))
                self.get_logger().warning(f"fact {kind} [{key}] left out of the index, not "
                                          f"served: {why}")

    def on_ground_request(self, request, response):
        # One read: the whole answer comes from one snapshot. Configured but inactive,
        # the index exists but is not served.
        index = self.index if self.serving else None
        audit = self.audit if index is not None else None
        too_long = over_limit(request, request_limits.GROUND)
        if too_long is not None:  # refused unread, whoever asks
            self.refused_requests += 1
            answer = invalid(*too_long)
            self._fill(response, answer, index)
        elif index is None:
            answer = GroundingAnswer(IDENTITY_UNVERIFIED, REASON_IDENTITY_UNVERIFIED,
                                     self.inactive_reason)
            self._fill(response, answer, index)
        else:
            question = grounding_request_from_msg(request)
            made = self._answers.get(question, index, self.priors)
            if made is None:
                answer = index.lookup(question, self.analogy_settings, self.priors)
                self._fill(response, answer, index)
                self._answers.put(question, answer, response)
            else:  # asked before of this index: the same answer, sent again
                answer, response = made
        # An id only for an answer that is audited: while inactive nothing is consulted
        # and nothing written, and the id stays empty.
        response.consultation_id = self._consultation_ids.next() if audit is not None else ""
        self.answers += 1
        if answer.status == ANALOGY:
            self.analogy_answers += 1
        elif answer.status == PRIOR:
            self.prior_answers += 1
        if audit is not None:
            text = (lambda name: clipped(getattr(request, name), request_limits.GROUND[name])) \
                if too_long else (lambda name: getattr(request, name))
            query = {"skill_id": text("skill_id"), "target_class": text("target_class"),
                     "environment": text("environment"),
                     "fact_kinds": [] if too_long else list(request.fact_kinds)}
            if request.allow_analogies:  # records of requests without them stay as they were
                query.update(allow_analogies=True, max_analogies=request.max_analogies,
                             target_properties=[] if too_long else [
                                 [kv.key, audited_number(kv.value)]
                                 for kv in request.target_properties])
            if request.allow_priors:
                query["allow_priors"] = True
            audit.submit(NewEvent(FACT_CONSULTATION, consultation_payload(
                response.consultation_id, text("requester"), text("intent_id"), query, answer),
                self.get_clock().now().nanoseconds))
        return response

    def _fill(self, response, answer: GroundingAnswer, index: GroundingIndex | None) -> None:
        if index is not None:
            response.identity_hash = index.identity_hash
        response.status, response.reason_code, response.reason = (
            answer.status, answer.reason_code, answer.reason)
        response.facts = [m for m in map(self._fact_messages.of, answer.facts)
                          if m is not None]  # None: a fact no message can be made of
        response.analogies = [analogy_to_msg(a, self._fact_messages.of)
                              for a in answer.analogies]
        response.priors = [prior_to_msg(p, self._fact_messages.of) for p in answer.priors]

    def on_explain_request(self, request, response):
        partition = self.partition if self.serving else None
        if partition is None:
            response.found, response.reason = False, f"inactive: {self.inactive_reason}"
            return response
        too_long = over_limit(request, request_limits.EXPLAIN)
        if too_long is not None:
            self.refused_requests += 1
            response.found, response.reason = False, "refused: {}: {}".format(*too_long)
            return response
        try:
            fact = find_fact(partition, request.fact_id, request.kind, request.key)
        except FactNotFound as exc:
            response.found, response.reason = False, str(exc)
            return response
        try:
            explanation = explain_fact(partition, fact)
            response.fact = fact_to_msg(fact)
        except Exception as exc:  # a value no message can be made of: said, not raised
            response.found = False
            response.reason = f"{fact.kind} [{fact.key}] cannot be explained: {exc}"
            return response
        response.found = True
        response.explanation_json = canonical_json(explanation)
        response.explanation_text = format_explanation(explanation)
        return response

    def _catch_up(self) -> None:
        """A delta lost on the way (published before this subscription matched the
        consolidator's new publisher: the topic is volatile) would leave the index
        behind until the next pass, an hour away by default. So each diagnostics period
        the store's checkpoint is read, and a run still missing one period later (not
        merely in flight: delta_watch.py) is loaded from the store."""
        partition = self.partition
        if self.index is None or partition is None:
            return
        with partition.store.read() as conn:
            newest = read_checkpoint(partition, conn).run_event_id
        lost = self._lost_deltas.check(newest, self.run_event_id)
        if lost:
            self.get_logger().warning(f"no facts delta for run {lost} (have run "
                                      f"{self.run_event_id}); reloading from the store")
            self._reload()

    def _publish_diagnostics(self) -> None:
        try:
            self._catch_up()
        except Exception as exc:  # a store outage: the next period tries again
            self.get_logger().warning(f"could not read the checkpoint: {exc}")
        values = {"answers": self.answers, "analogy_answers": self.analogy_answers,
                  "prior_answers": self.prior_answers, "prior_facts": self.priors.size,
                  "priors_refused_sources": len(self.priors_refused),
                  "identity_hash": self.gate.identity_hash or "",
                  "index_facts": self.index.size if self.index else 0,
                  "index_run_event_id": self.run_event_id, "index_reloads": self.reloads,
                  "refused_requests": self.refused_requests,
                  "refused_deltas": self.refused_deltas,
                  "facts_left_out": len(self.index.left_out) if self.index else 0,
                  "facts_not_sent": len(self._fact_messages.failed)}
        for (kind, key), why in list(self._fact_messages.failed.items()):  # atomic copy
            if (kind, key, why) not in self._logged_left_out:
                self._logged_left_out.add((kind, key, why))
                self.get_logger().warning(f"fact {kind} [{key}] left out of answers: {why}")
        if self.audit is not None:
            values.update({"audit_written": self.audit.written, "audit_queue": self.audit.depth,
                           "audit_overflowed": self.audit.overflowed})
            values.update({f"audit_redacted.privacy_{category}": n
                           for category, n in sorted(self.audit.redacted.items())})
        serving = self.serving and self.index is not None
        left_out = values["facts_left_out"] + values["facts_not_sent"]
        level = DIAG_OK if serving and not (self.audit and self.audit.overflowed) \
            and not self.priors_refused and not left_out else WARN
        message = "serving" if serving else f"inactive: {self.inactive_reason}"
        if self.audit and self.audit.overflowed:
            message += f"; {self.audit.overflowed} consultation audit records overflowed"
        if self.priors_refused:
            message += f"; {len(self.priors_refused)} priors source(s) refused (see the log)"
        if left_out:
            message += (f"; facts left out, not served: {left_out} (their values are "
                        "ill-shaped; see the log)")
        self.diagnostics.publish(level, message, values)

    def close(self) -> None:
        """Flush the consultation audit first (what was answered must be in the log), then
        stop the side executor."""
        if self.audit is not None:
            self.audit.close()
        self._side_executor.shutdown()
        self._side_thread.join(timeout=5.0)


def node_spec() -> NodeSpec:
    # A request arriving while another thread holds the GIL (the side thread, the audit
    # writer; in one process, every node's) waits for the switch interval (5 ms by
    # default), at each of its turns: keep that wait short.
    return NodeSpec(GroundingServer, make_executor=MainExecutor,
                    before_destroy=lambda node: node.close(),
                    configure_process=lambda: sys.setswitchinterval(REQUEST_GIL_WAIT_S))


def main(args=None) -> None:
    run_node(node_spec(), args)


if __name__ == "__main__":
    main(sys.argv)

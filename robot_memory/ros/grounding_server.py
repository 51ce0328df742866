"""grounding_server: the planner-facing `ground` service (GroundingQuery), read-only.

Answers from an in-memory GroundingIndex held by a ServedIndex (grounding/serving.py):
loaded from the store when the node is configured, then patched with each pass's
`facts_delta` (while inactive too, so it is current when the node is activated again),
or reloaded from the store when a delta was missed (off the request path). No database
query happens on the request path; every consultation is audited by a background
writer, its record built by grounding/audit.py.
Requests that allow analogies may be answered ANALOGY from the same index
(docs/analogies.md; parameters analogies_enabled, analogy_max_distance, analogy_k), and
requests that allow priors get the fleet's evidence, read from priors_sources when the
node is configured (docs/priors.md). Only while the node is active does `ground` answer
from the index (and audit the answer); otherwise it answers IDENTITY_UNVERIFIED.
"""

from __future__ import annotations

import sys
import threading

from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException

from robot_memory.canonical import canonical_json
from robot_memory.grounding import limits as request_limits
from robot_memory.grounding.analogies import AnalogySettings
from robot_memory.grounding.audit import AuditWriter, consultation_event
from robot_memory.grounding.explain import (FactNotFound, explain_fact, find_fact,
                                            format_explanation)
from robot_memory.grounding.index import GroundingIndex
from robot_memory.grounding.limits import over_limit
from robot_memory.grounding.lineage import IntentNotFound, explain_intent, format_lineage
from robot_memory.grounding.priors import EMPTY_PRIORS, PriorSettings
from robot_memory.grounding.request import (ANALOGY, IDENTITY_UNVERIFIED, PRIOR,
                                            REASON_IDENTITY_UNVERIFIED, GroundingAnswer, invalid)
from robot_memory.grounding.serving import ServedIndex, priors_for_identity
from robot_memory.msg import SemanticFactArray
from robot_memory.ros.conversions import (analogy_to_msg, fact_array_from_serialized, fact_to_msg,
                                          grounding_request_from_msg, prior_to_msg)
from robot_memory.ros.diagnostics import OK as DIAG_OK
from robot_memory.ros.diagnostics import WARN, DiagnosticsPublisher
from robot_memory.ros.fact_messages import AnswerMemo, ConsultationIds, FactMessages
from robot_memory.ros.managed_node import ManagedMemoryNode
from robot_memory.ros.params import declare_parameters
from robot_memory.ros.qos import FACTS_DELTA_QOS
from robot_memory.ros.side_executor import MainExecutor, RequestCallbackGroup, SideExecutor
from robot_memory.ros.spin import NodeSpec, run_node
from robot_memory.srv import ExplainFact, GroundingQuery
from robot_memory.store import MemoryStore

# The grounding server's switch interval (the whole process's in one process): the longest
# a `ground` request waits for the interpreter while another thread holds it. Shorter
# than CPython's default, because under a steady load with a pass every second the
# default's wait showed in the request's p99, while the CPU it cost could not be told
# apart from noise; shorter still gained nothing (docs/performance.md, Grounding).
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
        self.served = ServedIndex(self.analogy_settings, log=self._log,
                                  stale_half_life_s=self.params["stale_half_life_s"])
        self.partition = None
        self.audit: AuditWriter | None = None
        self.answers = 0
        self.analogy_answers = 0  # answered ANALOGY: facts lent, not the robot's own
        self.prior_answers = 0  # answered PRIOR: the fleet's evidence, not the robot's own
        self.priors = EMPTY_PRIORS
        self.priors_refused: list[str] = []  # why each refused priors source was refused
        self.refused_requests = 0  # over a field's size limit (request_limits)
        self.refused_deltas = 0  # facts_delta bytes that were no SemanticFactArray
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
        self.priors, self.priors_refused = priors_for_identity(
            self.params["priors_sources"], identity_hash, self.gate.manifest_path,
            PriorSettings(max_weight=self.params["prior_max_weight"]), log=self._log)
        self.served.attach(partition)

    def start(self, identity_hash: str) -> None:
        self.get_logger().info(f"serving 'ground' from {self.served.index.size} facts")

    def release(self) -> None:
        """Flush what was answered into the audit, then let go of the index and the store
        (ServedIndex.detach: a reload in the side thread must not bring it back)."""
        self.served.detach()
        partition, self.partition = self.partition, None
        self.priors, self.priors_refused = EMPTY_PRIORS, []
        audit, self.audit = self.audit, None
        if audit is not None:
            audit.close()
        if partition is not None:
            partition.store.close()

    def on_facts_delta(self, data: bytes) -> None:
        """A pass's delta, taken as bytes and read into FactRows in this thread
        (conversions.fact_array_from_serialized): rclpy's deserialization would hold the
        interpreter for the whole delta while `ground` requests wait."""
        if self.served.index is None:
            return
        try:
            delta = fact_array_from_serialized(data, self.diagnostics.fast_path_off)
        except Exception as exc:  # not a SemanticFactArray: the catch-up reloads if needed
            self.refused_deltas += 1
            self.get_logger().warning(f"refused a facts delta of {len(data)} bytes: {exc}",
                                      throttle_duration_sec=60.0)
            return
        self.served.apply_delta(delta)

    def on_ground_request(self, request, response):
        # One read: the whole answer comes from one snapshot. Configured but inactive,
        # the index exists but is not served.
        index = self.served.index if self.serving else None
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
            audit.submit(consultation_event(request, answer, response.consultation_id,
                                            self.get_clock().now().nanoseconds,
                                            refused_unread=too_long is not None))
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
        if request.intent_id:
            return self._explain_intent(partition, request.intent_id, response)
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

    def _explain_intent(self, partition, intent_id: str, response):
        """The lineage of an intent (grounding/lineage.py): read through the intent index
        in this side thread, never on `ground`'s path."""
        try:
            lineage = explain_intent(partition, intent_id)
        except IntentNotFound as exc:
            response.found, response.reason = False, str(exc)
            return response
        except Exception as exc:  # a store outage: said, not raised
            response.found, response.reason = False, f"intent {intent_id!r}: {exc}"
            return response
        response.found = True
        response.explanation_json = canonical_json(lineage)
        response.explanation_text = format_lineage(lineage)
        return response

    def _publish_diagnostics(self) -> None:
        try:
            self.served.catch_up()
        except Exception as exc:  # a store outage: the next period tries again
            self.get_logger().warning(f"could not read the checkpoint: {exc}")
        index = self.served.index
        values = {"answers": self.answers, "analogy_answers": self.analogy_answers,
                  "prior_answers": self.prior_answers, "prior_facts": self.priors.size,
                  "priors_refused_sources": len(self.priors_refused),
                  "identity_hash": self.gate.identity_hash or "",
                  "index_facts": index.size if index else 0,
                  "index_run_event_id": self.served.run_event_id,
                  "index_reloads": self.served.reloads,
                  "refused_requests": self.refused_requests,
                  "refused_deltas": self.refused_deltas,
                  "facts_left_out": len(index.left_out) if index else 0,
                  "facts_not_sent": len(self._fact_messages.failed)}
        for (kind, key), why in list(self._fact_messages.failed.items()):  # atomic copy
            if self.served.first_notice(kind, key, why):
                self.get_logger().warning(f"fact {kind} [{key}] left out of answers: {why}")
        if self.audit is not None:
            values.update({"audit_written": self.audit.written, "audit_queue": self.audit.depth,
                           "audit_overflowed": self.audit.overflowed})
            values.update({f"audit_redacted.privacy_{category}": n
                           for category, n in sorted(self.audit.redacted.items())})
        serving = self.serving and index is not None
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

"""Message <-> core model conversions (the only place that knows both)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from builtin_interfaces.msg import Time

from robot_memory.grounding.analogies import Analogy
from robot_memory.wire.semantic_fact import FactArray
from robot_memory.grounding.request import GroundingRequest
from rclpy.serialization import deserialize_message

from robot_memory.msg import Analogy as AnalogyMsg
from robot_memory.msg import (AnalogyProperty, ExecutionResult, KeyValue, PriorSource,
                              SemanticFact, SemanticFactArray)
from robot_memory.msg import Prior as PriorMsg
from robot_memory.grounding.priors import Prior
from robot_memory.grounding.served import served_fields
from robot_memory.wire import execution_result as result_cdr
from robot_memory.wire import semantic_fact as fact_cdr
from robot_memory.intake.records import ExecutionRecord, message_fields
from robot_memory.store import FactRow, fact_row_from_columns

# Told that a hand-written codec was passed over for rclpy's: (message type, why).
PassedOver = Callable[[str, str], None]


def stamp_to_ns(stamp: Time) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def ns_to_stamp(ns: int) -> Time:
    return Time(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


# The fields of a result (a message object) as plain data for validation.
result_fields = message_fields


def _deserialized(data: bytes) -> ExecutionResult:
    return deserialize_message(data, ExecutionResult)


# The fields of a serialized ExecutionResult (wire/execution_result.py): read from the
# bytes (much cheaper than building the message object); what that reader does not handle
# (big-endian CDR, a string or bool rclpy reads otherwise) goes through rclpy's
# deserialization once its bounds are checked. A partial: no Python frame of its own per
# result.
serialized_result_fields = partial(result_cdr.serialized_result_fields, _deserialized)


def result_reader(passed_over: PassedOver) -> Callable[[bytes], dict]:
    """serialized_result_fields, telling `passed_over` of each result rclpy had to read."""
    return partial(result_cdr.serialized_result_fields, _deserialized,
                   passed_over=passed_over)


def record_to_msg(record: ExecutionRecord) -> ExecutionResult:
    msg = ExecutionResult()
    msg.header.stamp = ns_to_stamp(record.stamp_ns)
    msg.skill_id, msg.target_class = record.skill_id, record.target_class
    msg.environment, msg.zone = record.environment, record.zone
    msg.parameters = [KeyValue(key=k, value=v) for k, v in record.parameters.items()]
    msg.observations = [KeyValue(key=k, value=v) for k, v in record.observations.items()]
    msg.success, msg.failure_reason = record.success, record.failure_reason
    msg.duration_s, msg.intent_id, msg.notes = record.duration_s, record.intent_id, record.notes
    msg.attempt_id, msg.amends = record.attempt_id, record.amends
    return msg


def fact_to_msg(fact: FactRow) -> SemanticFact:
    msg = SemanticFact()
    msg.fact_id, msg.kind, msg.key, msg.status = fact.id, fact.kind, fact.key, fact.status
    msg.confidence = float(fact.confidence)
    msg.n_observations = int(fact.n_observations)
    # The value is not kept on the fact: a node holds thousands.
    rate, parameters = served_fields(fact.peek_value())
    msg.has_success_rate = rate is not None
    msg.success_rate = 0.0 if rate is None else rate
    msg.recommended_parameters = [KeyValue(key=name, value=median)
                                  for name, median in parameters]
    msg.value_json = fact.value_json
    msg.last_supporting_event_id = int(fact.last_supporting_event_id)
    msg.rule_version = fact.rule_version
    msg.last_updated = ns_to_stamp(fact.last_updated_ns)
    return msg


def fact_element(fact: FactRow) -> bytes:
    """The SemanticFact fact_to_msg makes, serialized (wire/semantic_fact.py) as an
    element of a SemanticFactArray."""
    return fact_cdr.fact_element(fact, *served_fields(fact.peek_value()))


def fact_from_msg(msg: SemanticFact) -> FactRow:
    return FactRow(id=msg.fact_id, kind=msg.kind, key=msg.key,
                   value_json=msg.value_json,  # parsed on use
                   status=msg.status, confidence=msg.confidence,
                   n_observations=msg.n_observations, rule_version=msg.rule_version,
                   last_supporting_event_id=msg.last_supporting_event_id,
                   last_updated_ns=stamp_to_ns(msg.last_updated))


def fact_array_from_serialized(data: bytes, passed_over: PassedOver | None = None
                               ) -> FactArray:
    """A serialized SemanticFactArray's facts as FactRows: read from the bytes
    (wire/semantic_fact.py), and only what that reader does not handle through rclpy
    (then told to `passed_over`). ValueError for bytes whose fields do not lie within
    them (never given to rclpy, whose deserializer some such bytes crash); rclpy's
    error for those it does not deserialize."""
    array = fact_cdr.fact_array_from_cdr(data, fact_row_from_columns)
    if array is not None:
        return array
    problem = fact_cdr.structure_problem(data)
    if problem is not None:
        raise ValueError(f"no SemanticFactArray: {problem}")
    msg = deserialize_message(data, SemanticFactArray)
    if passed_over is not None:
        passed_over("SemanticFactArray", fact_cdr.left_to_rclpy(data))
    return FactArray(msg.identity_hash, msg.run_event_id, msg.previous_run_event_id,
                     [fact_from_msg(f) for f in msg.facts])


def grounding_request_from_msg(request) -> GroundingRequest:
    return GroundingRequest(skill_id=request.skill_id, target_class=request.target_class,
                            environment=request.environment, zone=request.zone,
                            fact_kinds=tuple(request.fact_kinds),
                            min_confidence=float(request.min_confidence),
                            max_results=int(request.max_results),
                            allow_analogies=bool(request.allow_analogies),
                            target_properties=tuple((kv.key, float(kv.value))
                                                    for kv in request.target_properties),
                            max_analogies=int(request.max_analogies),
                            allow_priors=bool(request.allow_priors))


def analogy_to_msg(analogy: Analogy, fact_msg=fact_to_msg) -> AnalogyMsg:
    """`fact_msg`: how a lent fact becomes a message (the grounding server passes its
    cache of fact messages, kept between passes; None from it leaves the fact out)."""
    msg = AnalogyMsg(target_class=analogy.target_class, distance=float(analogy.distance))
    msg.properties = [AnalogyProperty(name=p.name, query_value=float(p.query_value),
                                      query_source=p.query_source,
                                      case_value=float(p.case_value),
                                      case_fact_id=int(p.case_fact.id),
                                      scale=float(p.scale.value), scale_source=p.scale.source)
                      for p in analogy.properties]
    msg.facts = [m for m in map(fact_msg, analogy.facts) if m is not None]
    return msg


def prior_to_msg(prior: Prior, fact_msg=fact_to_msg) -> PriorMsg:
    """`fact_msg`: as for analogy_to_msg (the sources' facts live as long as the priors)."""
    msg = PriorMsg(skill_id=prior.skill_id, target_class=prior.target_class,
                   environment=prior.environment, prior_n=prior.prior_n,
                   prior_successes=prior.prior_successes,
                   prior_weight=float(prior.prior_weight), own_n=prior.own_n,
                   own_successes=prior.own_successes,
                   blended_success_rate=float(prior.blended_success_rate),
                   own_share=float(prior.own_share))
    msg.sources = [PriorSource(identity_hash=s.identity_hash, agent_id=s.agent_id,
                               origin=s.origin, fact=fact)
                   for s in prior.sources
                   if (fact := fact_msg(s.fact)) is not None]  # None: left out
    return msg

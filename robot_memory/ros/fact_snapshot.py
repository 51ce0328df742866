"""The latched `facts` snapshot, held as each fact's serialized bytes.

Each fact is kept as its CDR encoding, written straight from its FactRow once when it
changes (ros/conversions.fact_element), and the array message is framed around them
(wire/semantic_fact.frame_fact_array). Both are checked against the RMW's own serializer
once per process (`framing_problem`): where the encoding is another one (big-endian,
XCDR2), the snapshot keeps message objects instead, and the node says so
(`fast_path_off`).

Why bytes: a SemanticFact message object (its Time, its KeyValue list, a dozen boxed
fields) costs several times its value's size in Python objects; at 10^4 facts they were
the consolidator's largest allocation, and converting them all to C on every publish its
largest cost per pass (docs/performance.md, "Why the code is shaped this way").
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from builtin_interfaces.msg import Time
from rclpy.serialization import deserialize_message, serialize_message

from robot_memory.consolidation.fact_schemas import stored_fact_problem
from robot_memory.msg import SemanticFact, SemanticFactArray
from robot_memory.ros.conversions import fact_element, fact_to_msg
from robot_memory.store import FactRow
from robot_memory.wire.cdr import PLAIN_LE, encapsulation_problem
from robot_memory.wire.semantic_fact import frame_fact_array

FactKey = tuple[str, str]


def _sample_facts() -> list[FactRow]:
    """Facts whose fields end at every alignment, with and without a rate and
    parameters, to compare encodings with."""
    values = ['{"rate":0.25,"recommended_parameters":{"f":{"median":2.5}}}', "{}",
              '{"recommended_parameters":{"a":{"median":1.0},"bb":{"median":-3.5}}}',
              '{"rate":1,"note":"grüße"}', '{"rate":null}']
    return [FactRow(id=i + 1, kind="k" * (i + 1), key="key" + "é" * i, value_json=values[i],
                    status="active", confidence=0.5, n_observations=i, rule_version="v1.0",
                    last_supporting_event_id=7 * i, last_updated_ns=i * 1_000_000_001 + 1)
            for i in range(5)]


@lru_cache(maxsize=1)
def framing_problem() -> str | None:
    """None when fact_element and frame_fact_array give what the RMW's serializer gives
    for the same facts (the same length, and the same message once deserialized: padding
    bytes are left unset by it); else how they differ."""
    facts = _sample_facts()
    reference = SemanticFactArray(identity_hash="abcdefg", run_event_id=9,
                                  previous_run_event_id=8,
                                  facts=[fact_to_msg(f) for f in facts])
    reference.header.stamp = Time(sec=11, nanosec=12)
    expected = serialize_message(reference)
    if not expected.startswith(PLAIN_LE):
        return "the RMW serializes SemanticFactArray with " + encapsulation_problem(
            expected, PLAIN_LE)
    framed = frame_fact_array("abcdefg", 9, 8, 11, 12, [fact_element(f) for f in facts])
    if len(framed) != len(expected):
        return (f"the framed SemanticFactArray takes {len(framed)} bytes, the RMW's "
                f"serialization {len(expected)}")
    if deserialize_message(framed, SemanticFactArray) != reference:
        return "the framed SemanticFactArray deserializes to another message"
    return None


def framing_supported() -> bool:
    """Whether the snapshot is kept as bytes (framing_problem finds nothing)."""
    return framing_problem() is None


class FactSnapshot:
    """Every fact of the identity, ready to publish as one latched array."""

    def __init__(self) -> None:
        # Why the facts are kept as message objects rather than bytes (None: as bytes),
        # for the node to say.
        self.fast_path_off = framing_problem()
        self._framed = self.fast_path_off is None
        self._facts: dict[FactKey, bytes | SemanticFact] = {}
        # Facts that cannot be published, by (kind, key): why. Each is left out of the
        # snapshot and the deltas, alone; the node logs and counts them.
        self.left_out: dict[FactKey, str] = {}

    def __len__(self) -> int:
        return len(self._facts)

    def replace_all(self, facts: Iterable[FactRow]) -> None:
        self._facts = {}
        self.left_out = {}
        self.update(facts)

    def update(self, facts: Iterable[FactRow]) -> None:
        encode = fact_element if self._framed else fact_to_msg
        for fact in facts:
            key = (fact.kind, fact.key)
            try:
                problem = stored_fact_problem(fact.kind, fact.rule_version, fact.peek_value)
                if problem is not None:
                    raise ValueError(str(problem))
                self._facts[key] = encode(fact)
            except Exception as exc:  # any value: this fact alone is not published
                self._facts.pop(key, None)
                self.left_out[key] = f"{type(exc).__name__}: {exc}"
                continue
            if self.left_out:
                self.left_out.pop(key, None)

    def delta(self, facts: list[FactRow], identity_hash: str, run_event_id: int,
              previous_run_event_id: int, stamp: Time) -> bytes | SemanticFactArray:
        """Take these changed facts in, and give the array of them alone to publish:
        framed around the same encodings the snapshot keeps (each fact is encoded once:
        rclpy serializing a pass's delta holds the interpreter, in the process that
        answers `ground`)."""
        self.update(facts)
        encoded = self._facts
        changed = [encoded[key] for key in [(fact.kind, fact.key) for fact in facts]
                   if key in encoded]
        if self._framed:
            return frame_fact_array(identity_hash, run_event_id, previous_run_event_id,
                                    stamp.sec, stamp.nanosec, changed)
        msg = SemanticFactArray(identity_hash=identity_hash, facts=changed,
                                run_event_id=run_event_id,
                                previous_run_event_id=previous_run_event_id)
        msg.header.stamp = stamp
        return msg

    def message(self, identity_hash: str, run_event_id: int, previous_run_event_id: int,
                stamp: Time) -> bytes | SemanticFactArray:
        """What to hand to Publisher.publish: serialized bytes, or the message."""
        if self._framed:
            return frame_fact_array(identity_hash, run_event_id, previous_run_event_id,
                                    stamp.sec, stamp.nanosec, list(self._facts.values()))
        msg = SemanticFactArray(identity_hash=identity_hash, facts=list(self._facts.values()),
                                run_event_id=run_event_id,
                                previous_run_event_id=previous_run_event_id)
        msg.header.stamp = stamp
        return msg

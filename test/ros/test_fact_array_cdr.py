"""The grounding server reads a pass's facts delta from its serialized bytes
(robot_memory.wire.semantic_fact): for any message, the facts are exactly those rclpy's
deserialization gives, and bytes it does not read are left to rclpy."""

import struct

from builtin_interfaces.msg import Time
from hypothesis import given, settings
from hypothesis import strategies as st
from rclpy.serialization import deserialize_message, serialize_message

from robot_memory.msg import KeyValue, SemanticFact, SemanticFactArray
from robot_memory.bags.reading import make_typestore
from robot_memory.ros.conversions import fact_array_from_serialized, fact_from_msg
from robot_memory.store import fact_row_from_columns
from robot_memory.wire.semantic_fact import fact_array_from_cdr

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=10)
_i64 = st.integers(-2**63, 2**63 - 1)
_fact = st.builds(
    lambda i, kind, key, status, confidence, n, has_rate, rate, params, value, last, rule,
    sec, nanosec: SemanticFact(
        fact_id=i, kind=kind, key=key, status=status, confidence=confidence,
        n_observations=n, has_success_rate=has_rate, success_rate=rate,
        recommended_parameters=[KeyValue(key=k, value=v) for k, v in params],
        value_json=value, last_supporting_event_id=last, rule_version=rule,
        last_updated=Time(sec=sec, nanosec=nanosec)),
    _i64, st.sampled_from(["skill_success_rate", "zone_risk", ""]) | _text, _text,
    st.sampled_from(["active", "candidate"]) | _text, st.floats(), st.integers(0, 2**64 - 1),
    st.booleans(), st.floats(), st.lists(st.tuples(_text, st.floats()), max_size=3),
    st.sampled_from(['{"rate":0.5}', "{}", '{"note":"grüße, 把手"}']) | _text, _i64, _text,
    st.integers(-2**31, 2**31 - 1), st.integers(0, 2**32 - 1))


def _array(facts, run=7, previous=6) -> SemanticFactArray:
    msg = SemanticFactArray(identity_hash="ab" * 32, run_event_id=run,
                            previous_run_event_id=previous, facts=facts)
    msg.header.stamp.sec, msg.header.frame_id = 3, "frame"
    return msg


def _comparable(rows):
    """Floats by their bits (NaN equals NaN)."""
    return [tuple(struct.pack("<d", v) if isinstance(v, float) else v for v in
                  (r.id, r.kind, r.key, r.value_json, r.status, r.confidence, r.n_observations,
                   r.rule_version, r.last_supporting_event_id, r.last_updated_ns))
            for r in rows]


def _as_rclpy_reads(data: bytes):
    msg = deserialize_message(data, SemanticFactArray)
    return (msg.identity_hash, msg.run_event_id, msg.previous_run_event_id,
            _comparable([fact_from_msg(f) for f in msg.facts]))


def _as_read_here(array):
    return (array.identity_hash, array.run_event_id, array.previous_run_event_id,
            _comparable(array.facts))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(_fact, max_size=6), _i64, _i64)
def test_any_delta_reads_as_rclpy_reads_it(facts, run, previous):
    data = serialize_message(_array(facts, run, previous))
    array = fact_array_from_cdr(data, fact_row_from_columns)
    assert array is not None
    assert _as_read_here(array) == _as_rclpy_reads(data)


def test_cut_or_changed_bytes_are_read_as_rclpy_reads_them_or_left_to_it():
    facts = [SemanticFact(fact_id=i, kind="skill_success_rate", key=f"grasp + cup{i} + lab",
                          status="active", confidence=0.8, n_observations=40 + i,
                          has_success_rate=True, success_rate=0.75,
                          recommended_parameters=[KeyValue(key="force_n", value=25.0)],
                          value_json='{"rate":0.75}', last_supporting_event_id=100 + i,
                          rule_version="v1.0") for i in range(3)]
    data = serialize_message(_array(facts))
    variants = [data[:cut] for cut in range(len(data))]
    variants += [data[:i] + bytes([data[i] ^ flip]) + data[i + 1:]
                 for i in range(len(data)) for flip in (0x01, 0x80, 0xFF)]
    for variant in variants:
        array = fact_array_from_cdr(variant, fact_row_from_columns)
        if array is None:
            continue  # left to rclpy, which decodes or refuses it
        assert _as_read_here(array) == _as_rclpy_reads(variant), variant


def test_another_encoding_is_left_to_rclpy():
    data = serialize_message(_array([]))
    big_endian = b"\x00\x00" + data[2:]
    assert fact_array_from_cdr(big_endian, fact_row_from_columns) is None
    assert fact_array_from_cdr(b"", fact_row_from_columns) is None


def test_a_delta_rclpy_has_to_read_is_told_with_why():
    """What this reader leaves to rclpy and rclpy reads (a big-endian delta, as rosbags
    writes one) is told to the grounding server, which says so once."""
    fact = SemanticFact(fact_id=3, kind="skill_success_rate", key="k", status="active",
                        has_success_rate=True, success_rate=0.5, value_json='{"rate":0.5}',
                        recommended_parameters=[KeyValue(key="force_n", value=25.0)])
    data = serialize_message(_array([fact]))
    store, name = make_typestore(), "robot_memory/msg/SemanticFactArray"
    big_endian = bytes(store.serialize_cdr(store.deserialize_cdr(data, name), name,
                                           little_endian=False))
    told = []
    array = fact_array_from_serialized(big_endian, lambda *said: told.append(said))
    assert _as_read_here(array) == _as_rclpy_reads(data)
    assert told == [("SemanticFactArray", "encapsulation header 00 00 00 00, not 00 01 00 00 "
                     "(plain little-endian CDR)")]
    fact_array_from_serialized(data, lambda *said: told.append(said))
    assert len(told) == 1  # read here: nothing told

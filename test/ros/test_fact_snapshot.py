"""The latched snapshot framed around serialized facts reads back as the message the
RMW's own serializer would have carried."""

import json

from builtin_interfaces.msg import Time
from hypothesis import given, settings
from hypothesis import strategies as st
from rclpy.serialization import deserialize_message, serialize_message

from robot_memory.msg import SemanticFactArray
from robot_memory.ros.conversions import fact_to_msg
from robot_memory.ros import fact_snapshot
from robot_memory.ros.fact_snapshot import FactSnapshot, framing_supported
from robot_memory.store import FactRow


def fact(i: int, value_json: str) -> FactRow:
    return FactRow(id=i, kind=f"kind{'x' * (i % 5)}", key=f"key|{i}|é" * (1 + i % 3),
                   value_json=value_json, status="active", confidence=0.1 * i,
                   n_observations=i, rule_version="v1.0", last_supporting_event_id=10 * i,
                   last_updated_ns=1_700_000_000_123_456_789 + i)


VALUES = ['{"rate":0.75,"recommended_parameters":{"force_n":{"median":25.0}}}',
          '{"note":"grüße, 把手"}', "{}", '{"rate":null}',
          '{"recommended_parameters":{"a":{"median":1.5},"bb":{"median":-2.0}}}']


def test_this_rmw_takes_the_framed_snapshot():
    assert framing_supported()
    assert FactSnapshot().fast_path_off is None  # nothing for the consolidator to say


def test_where_the_framing_differs_the_snapshot_says_how(monkeypatch):
    """What the consolidator logs once and shows as fast_path_off.SemanticFactArray."""
    check = fact_snapshot.framing_problem.__wrapped__  # not the process's cached answer
    monkeypatch.setattr(fact_snapshot, "fact_element", lambda fact: bytes(8))
    assert check().startswith("the framed SemanticFactArray takes ")
    monkeypatch.setattr(fact_snapshot, "serialize_message", lambda msg: b"\x00\x00\x00\x00")
    assert check() == ("the RMW serializes SemanticFactArray with encapsulation header "
                       "00 00 00 00, not 00 01 00 00 (plain little-endian CDR)")


def test_framed_snapshot_deserializes_to_the_same_message():
    facts = [fact(i, VALUES[i % len(VALUES)]) for i in range(1, 23)]
    msgs = [fact_to_msg(f) for f in facts]
    snapshot = FactSnapshot()
    snapshot.replace_all(facts[:15])
    snapshot.update(facts[10:])  # 10..14 replaced in place, 15.. appended
    stamp = Time(sec=1_700_000_000, nanosec=999)
    framed = snapshot.message("ab" * 32, 77, 0, stamp)
    expected = SemanticFactArray(identity_hash="ab" * 32, run_event_id=77, facts=msgs)
    expected.header.stamp = stamp
    assert isinstance(framed, bytes)
    assert len(framed) == len(serialize_message(expected))
    assert deserialize_message(framed, SemanticFactArray) == expected
    assert len(snapshot) == len(msgs)


def test_an_empty_snapshot_is_a_valid_message():
    framed = FactSnapshot().message("cd" * 32, 0, 0, Time())
    assert deserialize_message(framed, SemanticFactArray) == SemanticFactArray(
        identity_hash="cd" * 32)


def test_where_framing_differs_the_snapshot_is_a_message_object():
    facts = [fact(i, VALUES[i % len(VALUES)]) for i in range(1, 6)]
    msgs = [fact_to_msg(f) for f in facts]
    snapshot = FactSnapshot()
    snapshot._framed = False  # as on an RMW whose encoding the framing does not match
    snapshot.replace_all(facts)
    stamp = Time(sec=3, nanosec=4)
    message = snapshot.message("ef" * 32, 5, 4, stamp)
    expected = SemanticFactArray(identity_hash="ef" * 32, run_event_id=5,
                                 previous_run_event_id=4, facts=msgs)
    expected.header.stamp = stamp
    assert message == expected


def test_a_delta_is_framed_around_the_changed_facts_and_updates_the_snapshot():
    facts = [fact(i, VALUES[i % len(VALUES)]) for i in range(1, 12)]
    msgs = [fact_to_msg(f) for f in facts]
    stamp = Time(sec=1_700_000_001, nanosec=5)
    for framed in (True, False):
        snapshot = FactSnapshot()
        snapshot._framed = framed  # both encodings: framed bytes, and message objects
        snapshot.replace_all(facts[:8])
        changed_facts = [fact(i, VALUES[(i + 1) % len(VALUES)]) for i in (3, 9, 10)]
        changed = [fact_to_msg(f) for f in changed_facts]
        delta = snapshot.delta(changed_facts, "ab" * 32, 78, 77, stamp)
        expected = SemanticFactArray(identity_hash="ab" * 32, run_event_id=78,
                                     previous_run_event_id=77, facts=changed)
        expected.header.stamp = stamp
        if framed:
            assert isinstance(delta, bytes)
            delta = deserialize_message(delta, SemanticFactArray)
        assert delta == expected
        whole = snapshot.message("ab" * 32, 78, 0, stamp)
        whole = deserialize_message(whole, SemanticFactArray) if framed else whole
        assert whole.facts == msgs[:2] + [changed[0]] + msgs[3:8] + changed[1:]


# Any value a stored row may hold (an older version's, a hand edit), even text that is
# not JSON, for the rules' facts and for operators'.
_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5)
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["rate", "recommended_parameters", "median", "skill_id", "x"]), inner,
    max_size=3), max_leaves=8)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_values, st.booleans(), st.sampled_from(["v1.0", "operator/1"])),
                min_size=1, max_size=6))
def test_a_fact_whose_value_cannot_be_published_is_left_out_alone(rows):
    facts = []
    for i, (value, as_text, rule_version) in enumerate(rows):
        text = value if isinstance(value, str) and as_text else json.dumps(value)
        facts.append(FactRow(id=i + 1, kind="skill_success_rate", key=f"key {i}",
                             value_json=text, status="active", confidence=0.5,
                             n_observations=i, rule_version=rule_version,
                             last_supporting_event_id=1, last_updated_ns=1))
    facts.append(fact(99, VALUES[0]))
    snapshot = FactSnapshot()
    snapshot.replace_all(facts)
    assert len(snapshot) + len(snapshot.left_out) == len(facts)
    assert ("kind" + "x" * 4, fact(99, VALUES[0]).key) not in snapshot.left_out
    delta = snapshot.delta(facts, "ab" * 32, 2, 1, Time(sec=1))
    published = deserialize_message(snapshot.message("ab" * 32, 2, 1, Time(sec=1)),
                                    SemanticFactArray)
    assert len(published.facts) == len(snapshot)
    assert len(deserialize_message(delta, SemanticFactArray).facts) == len(snapshot)

"""A wrong clock costs only its own results: a stamp too far ahead of its receipt is
stored at the receipt time (the skill's stamp kept beside it) and counted, so one skewed
result moves a well-observed fact no more than one ordinary result would."""

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from robot_memory.consolidation import consolidation_pass
from robot_memory.event_kinds import EXECUTION_RESULT
from robot_memory.intake.ingest import Ingest
from robot_memory.intake.receipt import RECEIVED, SENT_STAMP, at_receipt
from robot_memory.store import MemoryStore

A = "a" * 64
MINUTE_NS = 60 * 10**9
START_NS = 1_780_000_000 * 10**9  # 2026
YEAR_S = 365 * 24 * 3600
_stores = itertools.count()


def result(stamp_ns: int, success: bool, intent: str) -> dict:
    return {"stamp_ns": stamp_ns, "skill_id": "manipulation.grasp",
            "target_class": "glass_cup", "environment": "lab", "zone": "",
            "parameters": {"force_n": 20.0}, "observations": {}, "success": success,
            "failure_reason": "" if success else "slipped", "duration_s": 1.0,
            "intent_id": intent, "notes": ""}


def rate_fact(part):
    [fact] = [f for f in part.facts() if f.kind == "skill_success_rate"]
    return fact


def well_observed(tmp_path):
    """A store with 200 results a minute apart (22 of them failures), each received when
    it happened, consolidated; and the time the next one arrives."""
    part = MemoryStore(f"sqlite:///{tmp_path}/s{next(_stores)}.db").partition(A)
    ingest = Ingest(part, flush_period_s=0.01)
    for i in range(200):
        stamp = START_NS + i * MINUTE_NS
        ingest.submit_events([ingest.take_received(dict, result(stamp, i % 9 != 0, f"r{i}"),
                                                   "t", stamp)])
    assert ingest.flush()
    ingest.close()
    consolidation_pass(part)
    return part, START_NS + 200 * MINUTE_NS


def add_one(part, stamp_ns: int, received_ns: int, success: bool) -> Ingest:
    ingest = Ingest(part, flush_period_s=0.01)
    ingest.submit_events([ingest.take_received(dict, result(stamp_ns, success, "next"), "t",
                                               received_ns)])
    assert ingest.flush()
    ingest.close()
    consolidation_pass(part)
    return ingest


@settings(max_examples=12, deadline=None)
@given(ahead_s=st.integers(61, 20 * YEAR_S), success=st.booleans())
def test_one_skewed_result_moves_a_fact_no_more_than_an_ordinary_one(tmp_path_factory,
                                                                     ahead_s, success):
    tmp = tmp_path_factory.mktemp("skew")
    skewed, now = well_observed(tmp)
    before = rate_fact(skewed).confidence
    ingest = add_one(skewed, now + ahead_s * 10**9, now, success)
    ordinary, _ = well_observed(tmp)
    add_one(ordinary, now, now, success)
    assert ingest.clock_skew == 1
    assert abs(rate_fact(skewed).confidence - before) <= \
        abs(rate_fact(ordinary).confidence - before) + 1e-12
    [last] = list(skewed.events([EXECUTION_RESULT]))[-1:]
    assert last.stamp_ns == now  # stored at its receipt
    assert last.payload[SENT_STAMP] == now + ahead_s * 10**9
    assert last.payload[RECEIVED] == now


def test_without_the_receipt_check_one_skewed_stamp_erases_the_confidence(tmp_path):
    """What the check prevents (the issue's figure: 0.88 -> 0.21 over n=201): the same
    result with a tolerance of 20 years goes in at its own stamp."""
    part, now = well_observed(tmp_path)
    before = rate_fact(part).confidence
    ingest = Ingest(part, flush_period_s=0.01, max_clock_ahead_s=20 * YEAR_S)
    ingest.submit_events([ingest.take_received(
        dict, result(now + 11 * YEAR_S * 10**9, True, "x"), "t", now)])
    assert ingest.flush()
    ingest.close()
    consolidation_pass(part)
    assert ingest.clock_skew == 0
    assert rate_fact(part).confidence < before / 2


def test_stamps_behind_or_slightly_ahead_are_believed_and_an_unset_clock_checks_nothing():
    payload = {}
    assert at_receipt(payload, 5, 100, 10) == (5, False)  # late: believed
    assert payload == {RECEIVED: 100}
    payload = {}
    assert at_receipt(payload, 110, 100, 10) == (110, False)  # within the tolerance
    payload = {}
    assert at_receipt(payload, 111, 100, 10) == (100, True)
    assert payload == {RECEIVED: 100, SENT_STAMP: 111}
    payload = {}
    assert at_receipt(payload, 10**18, 0, 10) == (10**18, False)  # sim time not started
    assert payload == {}
    assert at_receipt(payload, 0, 100, 10) == (100, False)  # not stamped: its receipt
    assert payload == {RECEIVED: 100}
    payload = {}
    assert at_receipt(payload, 0, 0, 10) == (0, False)
    assert payload == {}

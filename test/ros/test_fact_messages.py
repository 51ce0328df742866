"""What `ground` converts per answer is made once: a fact row's message is reused while
that row is served, a changed fact (a new row) gets a message of its own, an answer is
reused only while its index and priors are served, and consultation ids stay unique."""

import json
import re

from robot_memory.grounding.analogies import Analogy
from robot_memory.ros.conversions import analogy_to_msg, fact_to_msg
from robot_memory.grounding.index import GroundingIndex
from robot_memory.grounding.request import GroundingRequest
from robot_memory.grounding.priors import EMPTY_PRIORS
from robot_memory.ros.fact_messages import AnswerMemo, ConsultationIds, FactMessages
from robot_memory.store import FactRow


def row(fact_id: int, rate: float, n: int) -> FactRow:
    value = {"rate": rate, "recommended_parameters": {"force_n": {"median": 25.0}}}
    return FactRow(id=fact_id, kind="skill_success_rate", key=f"grasp|cup|lab{fact_id}",
                   value_json=json.dumps(value), status="active", confidence=0.8,
                   n_observations=n, rule_version="v1", last_supporting_event_id=100 + n,
                   last_updated_ns=10**9 * n)


def test_a_row_is_converted_once_and_a_changed_fact_anew():
    messages = FactMessages()
    fact = row(1, 0.75, 16)
    first = messages.of(fact)
    assert messages.of(fact) is first  # the same row: the same message
    assert first == fact_to_msg(fact)  # and what converting it gives
    changed = row(1, 0.8, 17)  # the pass's delta brings a new row for the same fact
    again = messages.of(changed)
    assert again is not first
    assert (again.success_rate, again.n_observations) == (0.8, 17)
    assert again == fact_to_msg(changed)


def test_only_the_most_recently_served_rows_are_kept():
    messages = FactMessages(capacity=3)
    rows = [row(i, 0.5, i + 1) for i in range(5)]
    kept = messages.of(rows[0])
    for fact in rows[1:3]:
        messages.of(fact)
    assert messages.of(rows[0]) is kept  # served again: the most recent now
    for fact in rows[3:]:
        messages.of(fact)
    assert len(messages) == 3
    assert messages.of(rows[0]) is kept  # still among the three most recent
    assert messages.of(rows[1]) == fact_to_msg(rows[1])  # evicted: made again, right


def test_consultation_ids_are_32_hex_digits_and_never_repeat():
    ids, other = ConsultationIds(), ConsultationIds()
    made = [ids.next() for _ in range(1000)] + [other.next() for _ in range(1000)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in made)
    assert len(set(made)) == len(made)  # a second process's ids differ from the first's


def test_an_answer_is_reused_only_while_its_index_and_priors_are_served():
    memo = AnswerMemo(capacity=2)
    index = GroundingIndex("a" * 64, [row(1, 0.75, 16)])
    question = GroundingRequest("grasp", "cup")
    assert memo.get(question, index, EMPTY_PRIORS) is None
    memo.put(question, "answer", "response")
    # An equal question (a new request object) finds it.
    assert memo.get(GroundingRequest("grasp", "cup"), index, EMPTY_PRIORS) == \
        ("answer", "response")
    assert memo.get(GroundingRequest("grasp", "mug"), index, EMPTY_PRIORS) is None
    newer = index.with_changes([row(1, 0.8, 17)])  # a pass's delta: a new index
    assert memo.get(question, newer, EMPTY_PRIORS) is None
    assert len(memo) == 0  # what the old index answered is gone
    memo.put(question, "answer", "response")
    assert memo.get(question, newer, object()) is None  # other priors: asked anew
    for i in range(3):  # bounded
        memo.put(GroundingRequest("grasp", f"t{i}"), i, i)
        assert len(memo) <= 2


def test_a_fact_no_message_can_be_made_of_is_left_out_of_the_answer_alone():
    """A stored row the rules' shape does not hold (a hand edit): `ground` leaves it out
    of the response, names it, and serves the facts around it."""
    messages = FactMessages()
    bad = FactRow(id=7, kind="skill_success_rate", key="grasp|cup|bad",
                  value_json='{"rate": "high", "recommended_parameters": {"force_n": 25}}',
                  status="active", confidence=0.8, n_observations=3, rule_version="v1.0",
                  last_supporting_event_id=1, last_updated_ns=1)
    assert messages.of(bad) is None and messages.of(bad) is None
    assert list(messages.failed) == [("skill_success_rate", "grasp|cup|bad")]
    assert messages.of(row(1, 0.75, 16)) is not None
    lent = analogy_to_msg(Analogy("cup", 0.1, (), (bad, row(2, 0.5, 4))), messages.of)
    assert [f.fact_id for f in lent.facts] == [2]
    fixed = FactRow(id=7, kind="skill_success_rate", key="grasp|cup|bad",
                    value_json='{"rate": 0.5}', status="active", confidence=0.8,
                    n_observations=4, rule_version="v1.0", last_supporting_event_id=2,
                    last_updated_ns=2)  # the pass's delta brings a readable version
    assert messages.of(fixed) is not None and messages.failed == {}

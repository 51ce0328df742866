"""What a model reads from the memory tools, without ROS: the first line of every kind of
answer, the facts' lines, the tools' schemas, the leaf's contract, and replay_facts on a
real SQLite store (refusals first, then the same facts as the consolidation's replay)."""

import json

import anyio
import pytest

from robot_memory.consolidation import RulesConfig, consolidation_pass, replay_snapshot
from robot_memory.intake.records import validate_record
from robot_memory.planners import answers
from robot_memory.planners.leaf import KEYS, blackboard_key, success_statuses
from robot_memory.planners.mcp_server import TOOL_NAMES, build_server
from robot_memory.planners.replay import replay_facts
from robot_memory.store import MemoryStore, NewEvent

IDENT = "d" * 64
CUP = {"fact_id": 3, "kind": "skill_success_rate",
       "key": "manipulation.grasp + glass_cup + sim_relaxed", "status": "active",
       "confidence": 0.757, "n_observations": 16, "success_rate": 0.75,
       "recommended_parameters": {"force_n": 25.0},
       "value": {"successes": 12, "n": 16, "most_common_failure": "slipped"}}
MASS = {"fact_id": 2, "kind": "object_property", "key": "glass_cup + mass_kg",
        "confidence": 0.84, "n_observations": 16,
        "value": {"property": "mass_kg", "band": {"median": 0.21}}}


def ground(status, code="", **fields):
    return answers.render_ground({"status": status, "reason_code": code, **fields},
                                 "manipulation.grasp", "glass_jar", "sim_relaxed")


def test_the_first_line_says_what_an_answer_is():
    assert ground("OK", facts=[CUP], consultation_id="c1").startswith(
        "OK: memory holds facts of THIS robot about manipulation.grasp on glass_jar in "
        "sim_relaxed")
    assert ground("ABSTAIN", "no_fact", reason="no fact").startswith(
        "ABSTAIN (no_fact): memory has no fact it will serve")
    analogy = ground("ANALOGY", "no_fact", analogies=[
        {"target_class": "glass_cup", "distance": 0.21, "properties": ["mass_kg"],
         "facts": [CUP]}])
    assert analogy.startswith("ANALOGY (no_fact): memory has NO fact of this robot about "
                              "glass_jar; these are facts of OTHER targets")
    assert "analogy: glass_cup (OTHER target), distance 0.21 on mass_kg:" in analogy
    prior = ground("PRIOR", "no_fact", priors=[
        {"skill_id": "manipulation.grasp", "target_class": "glass_jar",
         "environment": "sim_relaxed", "prior_n": 20, "prior_successes": 15, "own_n": 0,
         "own_successes": 0, "blended_success_rate": 0.74}])
    assert prior.startswith("PRIOR (no_fact): this robot has NO servable fact") and \
        "facts of OTHER robots" in prior.splitlines()[0]
    assert "prior (OTHER robots): manipulation.grasp on glass_jar in sim_relaxed: 15/20" \
        in prior
    assert ground("IDENTITY_UNVERIFIED", "identity_unverified", reason="MISMATCH") \
        .startswith("REFUSED (identity_unverified): memory refused")
    assert ground("UNAVAILABLE", "service_unavailable", reason="down").startswith(
        "UNAVAILABLE: memory could not be asked (ground)")
    assert answers.render_preview(True, "", "0 new", 3, 1).startswith(
        "PREVIEW (dry run, NOTHING APPLIED)")
    assert answers.render_preview(False, "inactive: MISMATCH", "", 0, 0).startswith(
        "REFUSED: no preview: inactive: MISMATCH")


def test_context_facts_of_an_abstention_are_not_called_the_robots_knowledge():
    text = ground("ABSTAIN", "no_fact", facts=[MASS])
    assert "context facts only (no fact of the skill):" in text
    assert "facts of this robot:" not in text


def test_a_fact_line_holds_what_a_planner_needs():
    line = answers.fact_line(CUP)
    assert line == ("- skill_success_rate [manipulation.grasp + glass_cup + sim_relaxed] "
                    "active; confidence=0.76; n=16; success_rate=0.75; recommended "
                    "force_n=25; 12 of 16 successes in this regime, most common failure slipped; "
                    "fact_id=3")
    assert "mass_kg = 0.21 (median)" in answers.fact_line(MASS)
    # A value of a shape the summary does not know is shown whole, not dropped.
    odd = {**MASS, "kind": "object_property", "value": {"unexpected": [1, 2]}}
    assert answers.fact_line(odd).endswith('value={"unexpected":[1,2]}; fact_id=2')


class Refusing:
    """A backend that must not be reached: the server's own checks answer first."""

    def __getattr__(self, name):
        raise AssertionError(f"the backend's {name} was called")


def test_every_tool_is_read_only_and_every_field_is_described():
    server = build_server(Refusing())
    tools = anyio.run(server.list_tools)
    assert sorted(t.name for t in tools) == sorted(TOOL_NAMES)
    for tool in tools:
        assert tool.annotations.read_only_hint and not tool.annotations.destructive_hint
        for name, field in tool.input_schema.get("properties", {}).items():
            assert field.get("description"), f"{tool.name}.{name}"
    ground_schema = next(t for t in tools if t.name == "ground").input_schema
    assert ground_schema["required"] == ["skill_id"]


def call(server, name, arguments):
    result = anyio.run(lambda: server.call_tool(name, arguments))
    return "\n".join(c.text for c in result.content)


def test_tools_refuse_an_incomplete_question_before_asking_the_stack():
    server = build_server(Refusing())
    assert call(server, "explain_fact", {"kind": "zone_risk"}).startswith(
        "REFUSED: explain_fact: name the fact by fact_id, or by kind and key")
    assert call(server, "replay_facts", {"until_event_id": 3, "until_time_s": 2.0}) \
        .startswith("REFUSED: replay_facts: give exactly one")


def test_the_leaf_accepts_a_lent_answer_only_when_told():
    assert success_statuses() == {"OK"}
    assert success_statuses(["ANALOGY"]) == {"OK", "ANALOGY"}
    with pytest.raises(ValueError, match="ABSTAIN"):
        success_statuses(["ABSTAIN"])
    assert [blackboard_key("/robot_memory/ground/", k) for k in KEYS][0] == \
        "/robot_memory/ground/status"
    with pytest.raises(ValueError, match="no key"):
        blackboard_key("/x", "force_n")


def result(i, success=True, force=25.0):
    record = validate_record({"stamp_ns": 1_000_000_000 * (i + 1),
                              "skill_id": "manipulation.grasp", "target_class": "glass_cup",
                              "environment": "sim_relaxed", "parameters": {"force_n": force},
                              "success": success,
                              "failure_reason": "" if success else "slipped"})
    return NewEvent("execution_result", record.payload(), record.stamp_ns)


@pytest.fixture
def store(tmp_path):
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    store = MemoryStore(url)
    partition = store.partition(IDENT)
    partition.append_many([result(i, success=i >= 4, force=5.0 if i < 4 else 25.0)
                           for i in range(16)])
    consolidation_pass(partition)
    yield url, store.store_id, partition
    store.close()


def test_replay_refuses_what_is_not_the_verified_stacks(store, tmp_path):
    url, store_id, _ = store
    assert answers.refused("x", "y") == "REFUSED: x: y. Nothing was read around the refusal."
    assert "started without --db" in replay_facts("", IDENT, store_id, 3, 0.0, {})
    missing = tmp_path / "nowhere.db"
    assert f"no store at {missing}" in replay_facts(f"sqlite:///{missing}", IDENT, store_id,
                                                    3, 0.0, {})
    assert not missing.exists()  # not created by looking
    wrong_store = replay_facts(url, IDENT, "other", 3, 0.0, {})
    assert "the running stack verified store other" in wrong_store
    assert "until_event_id: no event 999" in replay_facts(url, IDENT, store_id, 999, 0.0, {})


def test_replay_gives_the_facts_the_log_gives_at_that_point(store):
    url, store_id, partition = store
    event = next(e for e in partition.events(["execution_result"]) if e.seq == 6)
    text = replay_facts(url, IDENT, store_id, event.id, 0.0, {})
    expected = json.loads(replay_snapshot(partition, RulesConfig(), until_seq=event.seq))
    assert text.startswith(f"REPLAY: the facts of THIS robot (identity {IDENT}) as they were "
                           f"after event {event.id}")
    assert len(text.splitlines()) == 1 + len(expected) and expected
    for entry in expected:
        assert f"- {entry['kind']} [{entry['key']}] {entry['status']}; " \
               f"confidence={entry['confidence']:.2f}; n={entry['n_observations']}" in text
    # The running consolidator's rules are the replay's: with a promotion bar no fact
    # reaches, every fact is a candidate.
    by_time = replay_facts(url, IDENT, store_id, 0, 6.0, {"promotion_min_observations": 100})
    assert "as they were at event time 6 s" in by_time.splitlines()[0]
    assert all(" candidate; " in line for line in by_time.splitlines()[1:])
    assert " active; " in text

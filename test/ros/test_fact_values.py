"""No fact value takes memory down, over real node processes: ill-shaped operator facts
of every kind sent to a running stack are refused with the field named, and every node
stays up and `ground` answers; one already in the log (and the row an older version
made of it) before the stack starts is skipped and named, and the stack still comes up
and serves."""

import json

from core.test_fact_value_fuzz import kinds_and_values
from hypothesis import given, settings

from robot_memory.consolidation import consolidation_pass
from robot_memory.consolidation.checkpoint import read_checkpoint
from robot_memory.consolidation.fact_schemas import value_problem
from robot_memory.event_kinds import CONSOLIDATION_RUN, OVERRIDE
from robot_memory.ros.client import format_grounding_block
from robot_memory.ros.conversions import fact_to_msg
from robot_memory.srv import Consolidate, Override
from robot_memory.store import FactRow, FactWrite, MemoryStore, NewEvent
from helpers import result_event

from ros.conftest import BOTH_PROCESS_MODES, wait_until
from ros.test_governance import wait_active

KEY = "manipulation.grasp + glass_cup + sim_relaxed"
NODES = ("manifest_verifier", "episodic_logger", "consolidator", "grounding_server")
# (kind, value_json, the field the refusal names): a handful, every kind.
ILL_SHAPED = [
    ("skill_success_rate", '{"recommended_parameters": {"force_n": 25}}', "value.skill_id"),
    ("skill_success_rate", json.dumps({"skill_id": "manipulation.grasp",
                                       "target_class": "glass_cup", "environment": "sim",
                                       "recommended_parameters": {"force_n": 25}}),
     "value.recommended_parameters.force_n"),
    ("interaction_pattern", '{"skill_id": "manipulation.grasp", "target_class": "glass_cup",'
     ' "failure_reason": "slipped", "share_of_failures": "most"}', "value.share_of_failures"),
    ("object_property", '{"target_class": "glass_cup", "property": "mass_kg", "band": 0.3}',
     "value.band"),
    ("zone_risk", '{"scope": "zone", "failure_rate": 1e999}', "value.zone"),
    ("zone_risk", '[1, {"scope": null}]', "value"),
    ("object_property", '{"target_class": "\\ud800", "property": "m", "band": {"median": 1}}',
     "value.target_class"),
]
REPORTED = {"recommended_parameters": {"force_n": 25}}


def served(probe):
    return wait_until(lambda: (a := probe.grounding.query(
        "manipulation.grasp", "glass_cup", "sim_relaxed")).status == "OK" and a, 30,
        "`ground` to answer OK")


def all_up(probe, stack):
    assert stack.exited() == {}, stack.exited()
    probe.diagnostics.clear()
    wait_until(lambda: set(NODES) <= set(probe.diagnostics), 20,
               lambda: f"/diagnostics from every node (got {sorted(probe.diagnostics)})")


@BOTH_PROCESS_MODES
def test_ill_shaped_overrides_of_every_kind_are_refused_and_the_stack_serves_on(
        probe, start_stack, certified_hash, db_url):
    part = MemoryStore(db_url).partition(certified_hash)
    part.append_many([result_event(i) for i in range(8)])
    stack = start_stack(period_s=3600.0)
    probe.wait_identity()
    wait_active(probe, "grounding_server")
    wait_active(probe, "consolidator")
    assert probe.call_signed(Consolidate, "consolidate",
                             Consolidate.Request(dry_run=False)).success
    served(probe)
    for kind, value_json, field in ILL_SHAPED:
        answer = probe.call_signed(Override, "override", Override.Request(
            action=Override.Request.ACTION_OPERATOR_FACT, operator_name="alice",
            reason="fuzz", kind=kind, key="k", value_json=value_json, confidence=1.0))
        assert not answer.success and answer.reason.startswith(f"{field}: "), \
            (kind, value_json, answer.reason)
    assert part.count_events(OVERRIDE) == 0  # nothing logged
    all_up(probe, stack)
    assert any(f.kind == "skill_success_rate" for f in served(probe).facts)
    level, message = probe.statuses["consolidator"]
    assert level == 0, message


def test_an_ill_shaped_operator_fact_already_in_the_log_is_skipped_and_the_stack_serves(
        probe, start_stack, certified_hash, db_url):
    """As an older version left it: the override in the log, a pass that applied it (its
    row in the table), and then the consolidator that could not publish it."""
    part = MemoryStore(db_url).partition(certified_hash)
    part.append_many([result_event(i) for i in range(8)])
    consolidation_pass(part)
    bad = part.append(OVERRIDE, {"action": "operator_fact", "operator": "alice",
                                 "reason": "by hand", "fact_kind": "skill_success_rate",
                                 "fact_key": "manipulation.grasp + mug + sim_relaxed",
                                 "value": REPORTED, "confidence": 1.0}, 10**12)
    with part.store.read() as conn:
        checkpoint = read_checkpoint(part, conn)
    part.commit_pass(checkpoint.run_seq, False, [], [FactWrite(
        None, "skill_success_rate", "manipulation.grasp + mug + sim_relaxed",
        json.dumps({**REPORTED, "source": "operator"}), "active", 1.0, 0, "operator/1",
        bad.id, 10**12)], [NewEvent(CONSOLIDATION_RUN, {
            "rule_version": "v1.0", "first_seq": bad.seq, "last_seq": bad.seq,
            "events_read": 0, "facts_touched": 1, "skipped": {}, "override_seq": bad.seq,
            "frozen": False, "reset": False,
            "touched_facts": ["skill_success_rate|manipulation.grasp + mug + sim_relaxed"]},
            10**12)])
    stack = start_stack(period_s=3600.0)
    probe.wait_identity()
    wait_active(probe, "consolidator")
    wait_active(probe, "grounding_server")
    assert any(f.kind == "skill_success_rate" for f in served(probe).facts)
    diagnostics = wait_until(
        lambda: (d := probe.diagnostics.get("consolidator")) and
        d.get("ill_shaped_operator_facts") == "1" and d, 20, "the skip on /diagnostics")
    assert "value.skill_id" in diagnostics[f"ill_shaped.event_{bad.id}"]
    assert diagnostics["facts_left_out"] == "1"
    level, message = probe.statuses["consolidator"]
    assert level == 1 and message.startswith("ill-shaped operator facts skipped: 1"), message
    grounding = wait_until(lambda: (d := probe.diagnostics.get("grounding_server")) and
                           d.get("facts_left_out") == "1" and d, 20,
                           "the row left out of the index on /diagnostics")
    assert int(grounding["index_facts"]) >= 2
    log = stack.log_path.read_text(errors="replace")
    assert f"override event {bad.id}" in log and "value.skill_id" in log
    # A pass over new results runs and publishes; nothing is fatal.
    part.append_many([result_event(100 + i) for i in range(4)])
    applied = probe.call_signed(Consolidate, "consolidate", Consolidate.Request(dry_run=False))
    assert applied.success and applied.events_read == 4, applied
    wait_until(lambda: any(f.n_observations == 12 for f in served(probe).facts
                           if f.kind == "skill_success_rate"), 20, "the new pass served")
    all_up(probe, stack)
    # Retracted by a well-shaped operator fact for the key: served, and the warnings clear.
    retract = probe.call_signed(Override, "override", Override.Request(
        action=Override.Request.ACTION_OPERATOR_FACT, operator_name="alice",
        reason="the force, as a band", kind="skill_success_rate",
        key="manipulation.grasp + mug + sim_relaxed", confidence=0.9, value_json=json.dumps(
            {"skill_id": "manipulation.grasp", "target_class": "mug",
             "environment": "sim_relaxed",
             "recommended_parameters": {"force_n": {"median": 25}}})))
    assert retract.success and retract.run_event_id > 0, retract.reason
    mug = wait_until(lambda: (a := probe.grounding.query(
        "manipulation.grasp", "mug", "sim_relaxed")).status == "OK" and a, 20, "mug served")
    assert [(kv.key, kv.value) for kv in mug.facts[0].recommended_parameters] == \
        [("force_n", 25.0)]
    wait_until(lambda: probe.statuses.get("consolidator", (1,))[0] == 0 and
               probe.diagnostics["consolidator"].get("facts_left_out") == "0", 20,
               lambda: f"the consolidator's warning to clear ({probe.statuses})")
    wait_until(lambda: probe.diagnostics["grounding_server"].get("facts_left_out") == "0", 20,
               "the index to take the retraction")


@settings(max_examples=60, deadline=None)
@given(kinds_and_values)
def test_a_value_of_its_kinds_shape_makes_a_message_and_a_prompt_block(kind_value):
    """What a planner reads of a fact (the SemanticFact's served fields, the prompt
    block) is there for any value of its kind's shape; any other value costs its own
    parts of the block only."""
    kind, value = kind_value
    fact = FactRow(id=1, kind=kind, key="k", value_json=json.dumps(value), status="active",
                   confidence=0.9, n_observations=5, rule_version="operator/1",
                   last_supporting_event_id=1, last_updated_ns=1)
    if value_problem(kind, value) is None:
        msg = fact_to_msg(fact)
        block = format_grounding_block([msg])
        assert block.startswith("known facts for this robot: k: ")
        assert "confidence = 0.90" in block
        says_something = kind != "skill_success_rate" or msg.has_success_rate or \
            bool(msg.recommended_parameters)
        # The kind's own parts come before confidence whenever the value has any.
        assert block.startswith("known facts for this robot: k: confidence") != says_something
    else:
        try:
            msg = fact_to_msg(fact)
        except Exception:  # the holders leave such a fact out (test_fact_snapshot.py)
            return
        assert "confidence = 0.90" in format_grounding_block([msg])

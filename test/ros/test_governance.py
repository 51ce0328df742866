"""Governance over real nodes: acknowledged writes, the privacy boundary, the growth
guard, integrity gating through the lifecycle, and isolation of identities."""

import sqlite3
import subprocess
import sys
from pathlib import Path

from lifecycle_msgs.msg import State
from lifecycle_msgs.srv import GetState

from robot_memory.consolidation import consolidation_pass
from robot_memory.event_kinds import EXECUTION_RESULT, PRIVACY_REJECTION
from robot_memory.msg import ExecutionResult, IdentityStatus, KeyValue
from robot_memory.srv import Consolidate, ExplainFact, Override, RecordEvent
from robot_memory.store import MemoryStore, boot_check
from helpers import result_event

from ros.conftest import stack_log, wait_until

SECRET = "jane.doe@example.org"


def result(stamp_s=1.0, **fields) -> ExecutionResult:
    msg = ExecutionResult(skill_id=fields.pop("skill_id", "manipulation.grasp"),
                          target_class="glass_cup", environment="sim_relaxed", success=True)
    msg.parameters = [KeyValue(key="force_n", value=25.0)]
    msg.header.stamp.sec = int(stamp_s)
    for key, value in fields.items():
        setattr(msg, key, value)
    return msg


def record(probe, msg, timeout=30.0):
    return probe.call(RecordEvent, "record_event", RecordEvent.Request(result=msg), timeout)


def lifecycle_state(probe, node: str) -> int:
    """The node's state; a lost answer (DDS under load) is asked again."""
    def ask():
        try:
            return probe.call(GetState, f"{node}/get_state", GetState.Request(), timeout=5.0)
        except AssertionError:
            return None
    return wait_until(ask, 30, f"{node}/get_state").current_state.id


def wait_active(probe, node="episodic_logger"):
    wait_until(lambda: lifecycle_state(probe, node) == State.PRIMARY_STATE_ACTIVE, 30,
               f"{node} to be activated by the verifier")


def test_record_event_is_acknowledged_only_when_durable(probe, start_stack, certified_hash,
                                                        db_url):
    start_stack()
    assert probe.wait_identity().state == IdentityStatus.VERIFIED
    wait_active(probe)
    answer = record(probe, result(5, intent_id="intent-1"))
    assert answer.accepted and answer.event_id > 0 and answer.reason_code == ""
    stored = MemoryStore(db_url).partition(certified_hash).event_by_id(answer.event_id)
    assert stored.seq == answer.seq and stored.payload["intent_id"] == "intent-1"

    bad = record(probe, result(6, skill_id=""))
    assert not bad.accepted and bad.reason_code == RecordEvent.Response.REASON_INVALID
    assert bad.reason.startswith("skill_id:")


def test_privacy_rejection_is_counted_and_logged_without_the_secret(probe, start_stack,
                                                                    certified_hash, db_url):
    start_stack()
    probe.wait_identity()
    wait_active(probe)
    answer = record(probe, result(7, notes=f"call {SECRET} about the cup"))
    assert not answer.accepted and answer.reason_code == RecordEvent.Response.REASON_PRIVACY
    assert answer.reason.startswith("notes:") and SECRET not in answer.reason
    probe.wait_logger()
    probe.publish_result(stamp_s=8, intent_id="password: hunter22")
    part = MemoryStore(db_url).partition(certified_hash)
    events = wait_until(lambda: len(e := list(part.events([PRIVACY_REJECTION]))) == 2 and e, 20,
                        "two privacy_rejection events")
    assert [(e.payload["source"], e.payload["field"], e.payload["category"]) for e in events] \
        == [("record_event", "notes", "email"), ("execution_results", "intent_id", "password")]
    assert part.count_events(EXECUTION_RESULT) == 0
    diag = wait_until(lambda: (d := probe.diagnostics.get("episodic_logger")) and
                      d.get("rejected.privacy_password") == "1" and d, 20, "the counts")
    assert diag["rejected.privacy_email"] == "1"
    MemoryStore(db_url).close()
    raw = b"".join(p.read_bytes() for p in Path(db_url.removeprefix("sqlite:///")).parent
                   .glob("memory.db*"))
    assert SECRET.encode() not in raw and b"hunter22" not in raw


def test_growth_guard_pauses_consolidation_and_hard_limit_refuses_loudly(
        probe, start_stack, certified_hash, db_url):
    stack = start_stack(growth_limit_mb=0.01, hard_limit_mb=0.05)
    probe.wait_identity()
    wait_active(probe)
    accepted = 0
    while (answer := record(probe, result(10 + accepted, notes="n" * 2000))).accepted:
        accepted += 1
        assert accepted < 200, "the hard limit never refused"
    assert answer.reason_code == RecordEvent.Response.REASON_STORE_FULL
    assert "hard limit" in answer.reason
    diag = wait_until(lambda: (d := probe.diagnostics.get("consolidator")) and
                      int(d.get("paused_passes", 0)) > 0 and d, 20, "a paused pass")
    assert diag["passes"] == "0"
    wait_until(lambda: "consolidation paused" in stack_log(stack), 10, "the warning")
    assert "new events are refused" in stack_log(stack)
    part = MemoryStore(db_url).partition(certified_hash)
    assert part.count_events(EXECUTION_RESULT) == accepted  # refused ones are not there
    logger = wait_until(lambda: (d := probe.diagnostics.get("episodic_logger")) and
                        d.get("rejected.store_full") == "1" and d, 20, "logger status")
    assert logger["growth_state"] == "over_hard_limit"


def test_corrupted_store_keeps_the_nodes_unconfigured(probe, start_stack, certified_hash,
                                                      db_url):
    part = MemoryStore(db_url).partition(certified_hash)
    part.append_many([result_event(i) for i in range(10)])
    bad_id = next(e.id for e in part.events() if e.seq == 4)
    conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
    conn.execute("DROP TRIGGER events_refuse_update")
    conn.execute("UPDATE events SET payload_json = replace(payload_json, '25.0', '99.0') "
                 "WHERE seq = 4")
    conn.commit()
    conn.close()
    start_stack()
    status = probe.wait_identity()
    assert status.state == IdentityStatus.STORE_CORRUPTED
    assert f"events.id {bad_id}" in status.reason and "edited" in status.reason
    assert probe.grounding.wait_for_service(30)
    # The server may answer before the latched status has reached it: it then says it
    # is waiting, and names the diagnosis once the status arrived.

    def answer_naming_the_diagnosis():
        answer = probe.grounding.query("manipulation.grasp", "glass_cup")
        return answer if "STORE_CORRUPTED" in answer.reason else None

    answer = wait_until(answer_naming_the_diagnosis, 30, "an answer naming STORE_CORRUPTED")
    assert answer.status == "IDENTITY_UNVERIFIED"
    for node in ("episodic_logger", "consolidator", "grounding_server"):
        assert lifecycle_state(probe, node) == State.PRIMARY_STATE_UNCONFIGURED
    assert part.count_events() == 10  # nothing written, nothing repaired


def test_old_tampering_found_after_boot_withdraws_the_nodes(probe, start_stack,
                                                            certified_hash, db_url):
    part = MemoryStore(db_url).partition(certified_hash)
    part.append_many([result_event(i) for i in range(30)])
    assert boot_check(part).ok  # a previous boot verified everything up to here
    conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
    conn.execute("DROP TRIGGER events_refuse_update")
    conn.execute("UPDATE events SET payload_json = replace(payload_json, '25.0', '99.0') "
                 "WHERE seq = 3")
    conn.commit()
    conn.close()
    stack = start_stack(boot_sample_events=0)  # this boot re-hashes nothing before the checkpoint
    wait_until(lambda: any(s.state == IdentityStatus.STORE_CORRUPTED for s in probe.identity),
               30, "the background full check to find the edit")
    assert "full store check failed" in probe.identity[-1].reason
    log = stack_log(stack)  # the boot check passed first; the status is latched, so read the log
    assert log.index("identity VERIFIED") < log.index("identity STORE_CORRUPTED")
    wait_until(lambda: lifecycle_state(probe, "grounding_server")
               != State.PRIMARY_STATE_ACTIVE, 20, "grounding_server withdrawn")
    answer = probe.grounding.query("manipulation.grasp", "glass_cup")
    assert answer.status == "IDENTITY_UNVERIFIED"


def test_another_identity_is_invisible_through_the_nodes(probe, start_stack, certified_hash,
                                                         db_url):
    other = MemoryStore(db_url).partition("b" * 64)
    other.append_many([result_event(i, target="red_mug") for i in range(6)])
    consolidation_pass(other)
    other_fact, other_head = other.facts()[0], other.head()
    start_stack()
    probe.wait_identity()
    wait_active(probe, "grounding_server")
    answer = probe.grounding.query("manipulation.grasp", "red_mug")
    assert answer.status == "ABSTAIN" and answer.facts == ()
    explained = probe.call(ExplainFact, "explain", ExplainFact.Request(fact_id=other_fact.id))
    assert not explained.found
    wait_active(probe)
    assert record(probe, result(3)).accepted
    assert other.head() == other_head and other.facts()[0] == other_fact
    assert MemoryStore(db_url).partition(certified_hash).count_events(EXECUTION_RESULT) == 1


def test_override_service_and_cli_take_effect_on_the_running_stack(probe, start_stack,
                                                                   certified_hash, db_url):
    part = MemoryStore(db_url).partition(certified_hash)
    part.append_many([result_event(i) for i in range(8)])
    start_stack(period_s=3600.0)
    probe.wait_identity()
    wait_active(probe, "grounding_server")
    wait_active(probe, "consolidator")
    assert probe.call_signed(Consolidate, "consolidate",
                             Consolidate.Request(dry_run=False)).success
    served = wait_until(lambda: (a := probe.grounding.query(
        "manipulation.grasp", "glass_cup", "sim_relaxed")).status == "OK" and a, 20, "a fact")
    fact = next(f for f in served.facts if f.kind == "skill_success_rate")

    refused = probe.call_signed(Override, "override", Override.Request(
        action=Override.Request.ACTION_INVALIDATE, operator_name="alice", reason="",
        fact_id=fact.fact_id))
    assert not refused.success and refused.reason.startswith("reason: required")
    done = probe.call_signed(Override, "override", Override.Request(
        action=Override.Request.ACTION_INVALIDATE, operator_name="alice",
        reason="wrong gripper fitted during those trials", fact_id=fact.fact_id))
    assert done.success and done.event_id > 0 and done.run_event_id > done.event_id
    wait_until(lambda: all(f.kind != "skill_success_rate" for f in probe.grounding.query(
        "manipulation.grasp", "glass_cup", "sim_relaxed").facts), 20,
        "the grounding server to stop serving the invalidated fact")
    assert {f.key: f.status for f in part.facts()}[fact.key] == "invalidated"

    # The CLI only logs the override; the running consolidator applies it on its own.
    freeze = subprocess.run([sys.executable, "-m", "robot_memory.cli", "override", "freeze",
                             "--db", db_url, "--identity", certified_hash,
                             "--operator", "bob", "--reason", "maintenance"],
                            capture_output=True, text=True, timeout=60)
    assert freeze.returncode == 0, freeze.stderr
    wait_until(lambda: (d := probe.diagnostics.get("consolidator")) and d.get("frozen") == "true",
               20, "the consolidator to report FROZEN")


def test_the_grounding_server_catches_up_with_a_run_it_heard_nothing_about(
        probe, start_stack, certified_hash, db_url):
    """A facts delta can be lost on the way (published before a new subscription has
    matched: the topic is volatile). Here a pass runs outside the stack, so no delta is
    published at all: the grounding server still serves its facts, read from the store
    within a few diagnostics periods, not an hour later at the next pass."""
    start_stack(period_s=3600.0)
    probe.wait_identity()
    wait_active(probe, "grounding_server")
    before = probe.grounding.query("manipulation.grasp", "glass_cup", "sim_relaxed")
    assert (before.status, before.reason_code) == ("ABSTAIN", "no_fact")
    part = MemoryStore(db_url).partition(certified_hash)
    part.append_many([result_event(i) for i in range(8)])
    assert consolidation_pass(part).applied
    served = wait_until(lambda: (a := probe.grounding.query(
        "manipulation.grasp", "glass_cup", "sim_relaxed")).status == "OK" and a, 20,
        "the grounding server to load the run from the store")
    assert served.facts[0].n_observations == 8

"""Builders shared by tests."""

from robot_memory.intake.records import validate_record
from robot_memory.store import NewEvent


def result_event(t_s: float, success: bool = True, force: float = 25.0, reason: str = "",
                 skill: str = "manipulation.grasp", target: str = "glass_cup",
                 env: str = "sim_relaxed", zone: str = "", observations=None) -> NewEvent:
    record = validate_record({"stamp_ns": int(t_s * 1e9), "skill_id": skill,
                              "target_class": target, "environment": env, "zone": zone,
                              "parameters": {"force_n": force}, "success": success,
                              "failure_reason": "" if success else (reason or "slipped"),
                              "observations": observations or {}})
    return NewEvent("execution_result", record.payload(), record.stamp_ns)


def varied_events(n: int) -> list[NewEvent]:
    """n results over 40 targets, 7 zones, 6 forces and 13 masses, ~70% successes,
    deterministic: big enough that a pass takes a while."""
    import random
    return [result_event(i * 0.5, success=random.Random(i).random() < 0.7,
                         force=float(5 * (i % 6)), target=f"object_{i % 40}",
                         zone=f"zone_{i % 7}", observations={"mass_kg": (i % 13) / 10})
            for i in range(n)]


def recompute_chain_from(db_url, identity, seq, new_payload_json):
    """The attack the hash chain alone cannot see: edit one event behind the triggers,
    recompute every later hash, move the head and refresh verified_checkpoints."""
    import sqlite3

    from robot_memory.store import event_digest
    from robot_memory.store.schema import GENESIS_HASH
    conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
    conn.execute("DROP TRIGGER events_refuse_update")
    rows = conn.execute("SELECT id, seq, kind, stamp_ns, payload_json, prev_hash FROM events "
                        "WHERE identity_hash = ? ORDER BY seq", (identity,)).fetchall()
    prev = GENESIS_HASH
    for row_id, row_seq, kind, stamp_ns, payload_json, prev_hash in rows:
        if row_seq < seq:
            prev = conn.execute("SELECT event_hash FROM events WHERE id = ?",
                                (row_id,)).fetchone()[0].hex()  # stored as 32 bytes
            continue
        if row_seq == seq:
            payload_json = new_payload_json
        digest = event_digest(prev, identity, row_seq, kind, stamp_ns, payload_json)
        conn.execute("UPDATE events SET payload_json = ?, prev_hash = ?, event_hash = ? "
                     "WHERE id = ?", (payload_json, bytes.fromhex(prev), bytes.fromhex(digest),
                                      row_id))
        prev = digest
    conn.execute("UPDATE chain_heads SET event_hash = ? WHERE identity_hash = ?", (prev, identity))
    last_id = conn.execute("SELECT id FROM events WHERE identity_hash = ? ORDER BY seq DESC",
                           (identity,)).fetchone()[0]
    conn.execute("DELETE FROM verified_checkpoints")
    conn.execute("INSERT INTO verified_checkpoints VALUES (?, ?, ?, ?, 1)",
                 (identity, len(rows), last_id, prev))
    conn.commit()
    conn.close()


MANIFEST_TEMPLATE = """agent_id: {agent}
embodiment: {embodiment}
capability_registry_hash: {h}
policy_version: grasp-policy-2.4.1
safety_envelope_hash: {h}
planner_contract_version: planner-contract-1.2
operator: test-lab
"""


def write_manifest(folder, agent: str, embodiment: str = "ur5e+robotiq_2f85"):
    """A valid manifest file for robot `agent` of `embodiment` (identities differ by agent)."""
    path = folder / f"{agent}.yaml"
    path.write_text(MANIFEST_TEMPLATE.format(agent=agent, embodiment=embodiment, h="3f" * 32))
    return path


def run_in_own_group(args: list[str], timeout: float):
    """subprocess.run for a command that starts node processes of its own (the sim):
    on a timeout its whole process group is killed, so no node is left behind to talk to
    the next test's nodes."""
    import os
    import signal
    import subprocess
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True, env=os.environ.copy())
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)

"""The CLI as a user runs it: a real process, a real SQLite file."""

import json
import subprocess
import sys

from robot_memory.manifest import load_manifest


def run(*args):
    return subprocess.run([sys.executable, "-m", "robot_memory.cli", *args],
                          capture_output=True, text=True, timeout=120)


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def good(i, success=True):
    return {"stamp": 100 + i * 0.5, "skill_id": "manipulation.grasp", "target_class": "glass_cup",
            "environment": "sim_relaxed", "parameters": {"force_n": 25},
            "observations": {"mass_kg": 0.2}, "success": success,
            "failure_reason": "" if success else "slipped"}


def test_ingest_consolidate_facts_round_trip(tmp_path, manifest_file, db_url):
    lines = tmp_path / "results.jsonl"
    write_jsonl(lines, [good(i, i % 4 != 0) for i in range(8)]
                + ["{not json", {**good(9), "skill_id": ""},
                   {**good(10), "parameters": {"force_n": "high"}}, {"skill_id": "x"},
                   {**good(11), "failure_reason": "slipped"}])
    ingest = run("ingest", "--db", db_url, "--manifest", str(manifest_file), "--jsonl",
                 str(lines))
    assert ingest.returncode == 1
    assert "ingested 8 execution results, rejected 5 lines" in ingest.stdout
    for line_number in (9, 10, 11, 12, 13):
        assert f"results.jsonl:{line_number}: rejected" in ingest.stderr
    assert "skill_id" in ingest.stderr and "parameters.force_n" in ingest.stderr
    assert "results.jsonl:13: rejected: failure_reason: given while success is true" \
        in ingest.stderr

    dry = run("consolidate", "--dry-run", "--db", db_url, "--manifest", str(manifest_file))
    assert dry.returncode == 0, dry.stderr
    assert "dry run, nothing written" in dry.stdout and "4 new" in dry.stdout
    assert json.loads(run("facts", "--json", "--db", db_url, "--manifest",
                          str(manifest_file)).stdout) == []

    applied = run("consolidate", "--apply", "--db", db_url, "--manifest", str(manifest_file))
    assert "[applied]" in applied.stdout
    facts = json.loads(run("facts", "--json", "--db", db_url, "--manifest",
                           str(manifest_file)).stdout)
    assert sorted(f["kind"] for f in facts) == ["interaction_pattern", "object_property",
                                                "skill_success_rate", "zone_risk"]
    rate = next(f for f in facts if f["kind"] == "skill_success_rate")
    assert (rate["value"]["n"], rate["value"]["successes"]) == (8, 6)

    identity = load_manifest(manifest_file).identity_hash()
    assert run("hash", "--manifest", str(manifest_file)).stdout.strip() == identity
    verify = run("verify", "--db", db_url)
    assert verify.returncode == 0 and "chain intact" in verify.stdout


def test_errors_are_one_line_and_non_zero(tmp_path, db_url):
    bad = tmp_path / "bad.yaml"
    bad.write_text("agent_id: x\n")
    result = run("facts", "--db", db_url, "--manifest", str(bad))
    assert result.returncode == 3  # an input error (robot_memory.errors.InputError)
    assert result.stderr.startswith("robot-memory facts: error: manifest")
    assert "Traceback" not in result.stderr


def test_ingest_refuses_hostile_lines_one_by_one_and_stores_the_rest(tmp_path, manifest_file,
                                                                     db_url):
    """A stamp past int64 nanoseconds (also as a decimal string whose exponent no
    arithmetic holds: it once stopped the command with an internal error and nothing
    stored), a line of 2 MB, JSON nested 100,000 deep, a secret, a stamp years ahead, a
    text JSON can spell but no store can encode: each is its own line's problem, with its
    line number and reason, counted; the rest is stored."""
    from robot_memory.event_kinds import EXECUTION_RESULT, PRIVACY_REJECTION
    from robot_memory.store import MemoryStore
    lines = tmp_path / "hostile.jsonl"
    complete = {**good(9), "zone": "", "failure_reason": "", "duration_s": 1.0,
                "intent_id": "", "notes": "bad \udcff"}  # valid on the fast path but for it
    write_jsonl(lines, [good(0), {**good(1), "stamp": 10**12}, good(2),
                        json.dumps({**good(3), "notes": "x" * 2_000_000}),
                        "[" * 100_000 + "]" * 100_000,
                        {**good(5), "notes": "password=hunter2"},
                        {**good(6), "stamp": 4_000_000_000}, good(7),
                        {**good(8), "stamp": "1e999999999999"}, complete,
                        {**good(10), "stamp": 2**63}, good(11)])
    ingest = run("ingest", "--db", db_url, "--manifest", str(manifest_file), "--jsonl",
                 str(lines))
    assert ingest.returncode == 1, ingest.stderr
    assert "internal error" not in ingest.stderr
    assert "ingested 5 execution results, rejected 7 lines" in ingest.stdout
    assert ("rejected by reason: invalid_value 4, malformed 1, oversized 1, "
            "privacy_password 1") in ingest.stdout
    assert "1 stamped ahead, stored at receipt (clock_skew)" in ingest.stdout
    for number in (2, 9, 11):
        assert f"hostile.jsonl:{number}: rejected: stamp: " in ingest.stderr
    assert "is past what a 64-bit nanosecond time can hold (year 2262) " \
        "(reason invalid_value)" in ingest.stderr
    assert "hostile.jsonl:4: rejected: line: more than 1048576 bytes, not read " \
        "(reason oversized)" in ingest.stderr
    assert "hostile.jsonl:5: rejected: line: nested too deeply" in ingest.stderr
    assert "hostile.jsonl:6: rejected: notes:" in ingest.stderr
    assert "hostile.jsonl:10: rejected: notes: text that is not valid Unicode" \
        in ingest.stderr
    assert "hunter2" not in ingest.stderr
    part = MemoryStore(db_url).partition(load_manifest(manifest_file).identity_hash())
    stored = list(part.events([EXECUTION_RESULT]))
    assert [e.payload["sent_stamp_ns"] for e in stored if "sent_stamp_ns" in e.payload] == \
        [4_000_000_000 * 10**9]
    assert len(stored) == 5
    [refusal] = list(part.events([PRIVACY_REJECTION]))
    assert refusal.payload["field"] == "notes" and refusal.payload["source"] == \
        "ingest hostile.jsonl:6"

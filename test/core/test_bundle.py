"""export / verify-bundle / import-bundle: evidence a reviewer can check offline."""

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import result_event, varied_events

from robot_memory.errors import InputError
from robot_memory.evidence.bundle import (
    EVENTS,
    FACTS,
    INFO,
    SUMS,
    BundleError,
    export_bundle,
    import_bundle,
    verify_bundle,
)
from robot_memory.consolidation import consolidation_pass, facts_snapshot
from robot_memory.consolidation import overrides as ov
from robot_memory.event_kinds import FACT_CONSULTATION, KNOWLEDGE_CONFLICT
from robot_memory.manifest import load_manifest
from robot_memory.store import MemoryStore, NewEvent

DAY = 86400
EXAMPLE_MANIFEST = Path(__file__).resolve().parents[2] / "robot_memory" / "config" / \
    "example_manifest.yaml"


def run(*args):
    return subprocess.run([sys.executable, "-m", "robot_memory.cli", *args],
                          capture_output=True, text=True, timeout=120)


def build_history(partition):
    """Several passes, a contested fact, overrides, consultations, and results logged after
    the last pass (not yet consolidated)."""
    partition.append_many(varied_events(200))
    consolidation_pass(partition)
    # Evidence that turns: many successes long ago, failures now -> contested.
    partition.append_many([result_event(10 * DAY + i, success=True, target="mug")
                           for i in range(20)])
    consolidation_pass(partition)
    partition.append_many([result_event(40 * DAY + i, success=False, target="mug")
                           for i in range(20)])
    consolidation_pass(partition)
    fact = next(f for f in partition.facts() if f.kind == "zone_risk")
    ov.record_invalidation(partition, "ana", "sensor was miscalibrated", fact, 41 * DAY)
    ov.record_operator_fact(partition, "ana", "measured by hand", "object_property",
                            "bottle + mass_kg", {"target_class": "bottle", "property": "mass_kg",
                                                 "band": {"median": 0.5}, "mean": 0.5},
                            1.0, 41 * DAY + 1)
    partition.append_many([NewEvent(FACT_CONSULTATION, {
        "consultation_id": i, "requester": "planner", "intent_id": f"i{i}", "status": "OK",
        "reason_code": "", "query": {"skill_id": "manipulation.grasp"},
        "facts": [{"fact_id": 1, "kind": "skill_success_rate", "key": "k",
                   "rule_version": "v1.0"}]}, 41 * DAY + 2 + i) for i in range(3)])
    consolidation_pass(partition)
    partition.append_many([result_event(42 * DAY + i) for i in range(5)])  # not consolidated
    assert partition.count_events(KNOWLEDGE_CONFLICT) >= 1


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("bundle_source")
    store = MemoryStore(f"sqlite:///{root / 'memory.db'}")
    partition = store.partition(load_manifest(EXAMPLE_MANIFEST).identity_hash())
    build_history(partition)
    export_bundle(partition, root / "bundle", manifest_path=EXAMPLE_MANIFEST)
    yield root / "bundle", partition
    store.close()


def test_export_verifies_and_matches_sha256sum(bundle):
    root, partition = bundle
    verdict = verify_bundle(root)
    assert verdict.ok, verdict.problems
    assert any("byte-equal" in note for note in verdict.notes)
    check = subprocess.run(["sha256sum", "-c", SUMS], cwd=root, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    facts = "[" + ",".join((root / FACTS).read_text().splitlines()) + "]"
    assert facts == facts_snapshot(partition)
    info = json.loads((root / INFO).read_text())
    assert (info["chain_head"]["seq"], info["chain_head"]["event_hash"]) == partition.head()
    assert info["facts_until_seq"] < partition.head()[0]  # 5 results after the last pass
    assert info["counts"]["runs"] == 4 and info["counts"]["consultations"] == 3


def _edited_copies(root, tmp_path, name, count, seed):
    data = (root / name).read_bytes()
    rng = random.Random(seed)
    for k in range(count):
        position = rng.randrange(len(data))
        new = rng.choice([b for b in b"0123456789abcdef\"{}:, \nAZ\xff" if b != data[position]])
        copy = tmp_path / f"{name}.{k}"
        subprocess.run(["cp", "-r", str(root), str(copy)], check=True)
        (copy / name).write_bytes(data[:position] + bytes([new]) + data[position + 1:])
        yield copy, data[:position].count(b"\n") + 1


@pytest.mark.parametrize("name", [EVENTS, FACTS, INFO, "runs.jsonl", "consultations.jsonl"])
def test_any_edited_byte_is_found_with_file_and_line(bundle, tmp_path, name):
    root, _ = bundle
    for copy, line in _edited_copies(root, tmp_path, name, 6, seed=name):
        verdict = verify_bundle(copy)
        assert not verdict.ok
        assert verdict.problems[0].startswith(f"{name}:{line}:"), (line, verdict.problems)


def test_edits_to_the_checksums_and_manifest_are_found(bundle, tmp_path):
    root, _ = bundle
    for copy, line in _edited_copies(root, tmp_path, SUMS, 5, seed=1):
        verdict = verify_bundle(copy)
        assert not verdict.ok
        assert f"{SUMS}:{line}:" in verdict.problems[0] or \
            f"{SUMS} line {line}" in verdict.problems[0], (line, verdict.problems)
    copy = tmp_path / "m"
    subprocess.run(["cp", "-r", str(root), str(copy)], check=True)
    text = (copy / "manifest.yaml").read_text()
    (copy / "manifest.yaml").write_text(text.replace("1.", "2.", 1))
    assert verify_bundle(copy).problems[0].startswith("manifest.yaml")


def test_cli_export_verify_and_a_failing_verify(tmp_path, db_url, manifest_file):
    store = MemoryStore(db_url)
    build_history(store.partition(load_manifest(manifest_file).identity_hash()))
    out = tmp_path / "b"
    exported = run("export", "--out", str(out), "--db", db_url, "--manifest",
                   str(manifest_file))
    assert exported.returncode == 0, exported.stderr
    ok = run("verify-bundle", str(out))
    assert ok.returncode == 0 and "bundle verified" in ok.stdout
    lines = (out / EVENTS).read_text().splitlines()
    lines[9] = lines[9].replace('"success":true', '"success":false', 1)
    (out / EVENTS).write_text("\n".join(lines) + "\n")
    bad = run("verify-bundle", str(out))
    assert bad.returncode == 1
    assert f"{EVENTS}:10: event_hash does not match its content" in bad.stderr
    again = run("export", "--out", str(out), "--db", db_url, "--manifest", str(manifest_file))
    assert again.returncode == InputError.exit_code and "not empty" in again.stderr
    other = run("export", "--out", str(tmp_path / "c"), "--db", db_url, "--manifest",
                str(manifest_file), "--param", "prior_weight=3")
    assert other.returncode == InputError.exit_code and "--param" in other.stderr
    assert not (tmp_path / "c").exists()


def test_reimport_into_fresh_sqlite_and_postgres_gives_byte_equal_facts(bundle, tmp_path,
                                                                        pg_url):
    root, original = bundle
    wanted = "[" + ",".join((root / FACTS).read_text().splitlines()) + "]"
    for url in (f"sqlite:///{tmp_path / 'fresh.db'}", pg_url):
        store = MemoryStore(url)
        partition, passes = import_bundle(root, store)
        assert passes == 4
        assert partition.head() == original.head()
        assert facts_snapshot(partition) == wanted
        with pytest.raises(BundleError, match="already holds"):
            import_bundle(root, store)
        store.close()

"""Only an operator may change what the robot knows or runs, over real node processes:
`override`, `consolidate` (applied) and `manage_nodes` without an operator's credential
are refused with the reason, counted on /diagnostics, logged, and change nothing; signed,
they work, and the operator recorded is the key's; `ground`, `explain` and a dry-run
`consolidate` stay open; a reset's archive stays in the archive folder."""

import subprocess
import sys

import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers import result_event
from lifecycle_msgs.msg import State

from robot_memory.event_kinds import OVERRIDE
from robot_memory.srv import Consolidate, ExplainFact, ManageNodes, Override
from robot_memory.store import MemoryStore

from ros.conftest import BOTH_PROCESS_MODES, OPERATOR, stack_log, wait_until
from ros.test_governance import lifecycle_state, wait_active

PAUSE = ManageNodes.Request.PAUSE
# An object_property value as the rule renders it (the grounding index reads its fields).
MASS = ('{"band": {"max": 0.31, "median": 0.31, "min": 0.31, "q1": 0.31, "q3": 0.31}, '
        '"mean": 0.31, "n": 1, "property": "mass_kg", "target_class": "glass_cup"}')


def operator_fact(**fields) -> Override.Request:
    return Override.Request(action=Override.Request.ACTION_OPERATOR_FACT,
                            reason="measured on the bench", kind="object_property",
                            key="glass_cup + mass_kg",
                            value_json=MASS, confidence=0.9, **fields)


def counted(probe, node: str, key: str) -> int:
    return int((probe.diagnostics.get(node) or {}).get(key, -1))


@BOTH_PROCESS_MODES
def test_only_signed_requests_change_knowledge_or_nodes(probe, start_stack, certified_hash,
                                                        db_url):
    part = MemoryStore(db_url).partition(certified_hash)
    part.append_many([result_event(i) for i in range(8)])
    stack = start_stack(period_s=3600.0, pass_after_new_events=0)
    probe.wait_identity()
    wait_active(probe, "consolidator")
    wait_active(probe, "grounding_server")
    head = part.head()

    # Unsigned: refused with the reason, and nothing is written or paused.
    applied = probe.call(Consolidate, "consolidate", Consolidate.Request(dry_run=False))
    assert not applied.success and applied.reason.startswith("refused: credential missing: ")
    assert "robot-memory sign" in applied.reason
    fact = probe.call(Override, "override", operator_fact(operator_name=OPERATOR))
    assert not fact.success and fact.reason.startswith("refused: credential missing")
    paused = probe.call(ManageNodes, "manifest_verifier/manage_nodes",
                        ManageNodes.Request(command=PAUSE))
    assert not paused.success and paused.message.startswith("refused: credential missing")
    assert part.head() == head and part.facts() == []
    assert lifecycle_state(probe, "consolidator") == State.PRIMARY_STATE_ACTIVE
    # Reading stays open: a dry run, ground.
    preview = probe.call(Consolidate, "consolidate", Consolidate.Request(dry_run=True))
    assert preview.success and preview.events_read == 8 and preview.run_event_id == 0
    assert probe.grounding.query("manipulation.grasp", "glass_cup").reason_code == "no_fact"

    # Signed: the pass applies; an operator fact is recorded under the key's name.
    signed = probe.call_signed(Consolidate, "consolidate", Consolidate.Request(dry_run=False))
    assert signed.success and signed.events_read == 8, signed.reason
    assert wait_until(lambda: probe.grounding.query("manipulation.grasp", "glass_cup").ok, 20,
                      "ground to serve the pass's facts")
    recorded = probe.call_signed(Override, "override", operator_fact())
    assert recorded.success, recorded.reason
    accepted = probe.last_signed
    explained = probe.call(ExplainFact, "explain", ExplainFact.Request(
        kind="object_property", key="glass_cup + mass_kg"))
    assert explained.found and explained.fact.rule_version == "operator/1"

    # Signed by a key the stack does not know, tampered with, replayed, or naming another
    # operator: refused.
    stranger = Ed25519PrivateKey.generate()
    unknown = probe.call_signed(Override, "override", operator_fact(), key=stranger)
    assert not unknown.success and "credential unknown_key" in unknown.reason
    tampered = operator_fact(credential=accepted.credential)
    tampered.value_json = tampered.value_json.replace("0.31", "9.99")
    forged = probe.call(Override, "override", tampered)
    assert not forged.success and "credential bad_signature" in forged.reason
    replayed = probe.call(Override, "override", accepted)
    assert not replayed.success and "credential replayed" in replayed.reason
    mismatch = probe.call_signed(Override, "override", operator_fact(operator_name="mallory"))
    assert not mismatch.success and "credential operator_mismatch" in mismatch.reason
    assert "'mallory'" in mismatch.reason and f"'{OPERATOR}'" in mismatch.reason
    assert [e.payload["operator"] for e in part.events(kinds=[OVERRIDE])] == [OPERATOR]

    # A signed PAUSE holds the consolidator.
    held = probe.call_signed(ManageNodes, "manifest_verifier/manage_nodes",
                             ManageNodes.Request(command=PAUSE, node_names=["consolidator"]))
    assert held.success, held.message
    wait_until(lambda: lifecycle_state(probe, "consolidator") == State.PRIMARY_STATE_INACTIVE,
               30, "the consolidator paused")

    # Counted by reason on /diagnostics, and logged with a stable line.
    wait_until(lambda: counted(probe, "consolidator", "refused_credentials") == 6, 10,
               lambda: f"6 refusals counted, got {probe.diagnostics.get('consolidator')}")
    values = probe.diagnostics["consolidator"]
    assert {code: values[f"refused_credentials.{code}"] for code in (
        "missing", "unknown_key", "bad_signature", "replayed", "operator_mismatch")} == \
        {"missing": "2", "unknown_key": "1", "bad_signature": "1", "replayed": "1",
         "operator_mismatch": "1"}
    assert values["operator_keys"] == OPERATOR and values["accepted_credentials"] == "2"
    wait_until(lambda: counted(probe, "manifest_verifier", "refused_credentials.missing") == 1,
               10, "the verifier's refusal counted")
    log = stack_log(stack)
    assert f"refused /{probe.namespace}/override request: credential missing: " in log
    assert f"refused /{probe.namespace}/manifest_verifier/manage_nodes request: " \
           "credential missing" in log
    assert f"accepted /{probe.namespace}/consolidate request signed by {OPERATOR}" in log


def test_with_no_operator_keys_every_mutating_call_is_refused(probe, start_stack):
    start_stack(operator_keys=[], period_s=3600.0,
                nodes=["manifest_verifier", "consolidator"],
                managed_nodes=["consolidator"])
    probe.wait_identity()
    wait_active(probe, "consolidator")
    for answer in (
            probe.call_signed(Consolidate, "consolidate", Consolidate.Request(dry_run=False)),
            probe.call_signed(Override, "override", operator_fact())):
        assert not answer.success
        assert answer.reason.startswith("refused: credential no_operator_keys: no operator "
                                        "keys configured")
        assert "robot-memory keygen --operator NAME" in answer.reason
    paused = probe.call_signed(ManageNodes, "manifest_verifier/manage_nodes",
                               ManageNodes.Request(command=PAUSE))
    assert not paused.success and "no_operator_keys" in paused.message
    assert probe.call(Consolidate, "consolidate", Consolidate.Request(dry_run=True)).success
    wait_until(lambda: (probe.diagnostics.get("consolidator") or {}).get("operator_keys", "")
               .startswith("none"), 10, "operator_keys: none on /diagnostics")


def test_a_reset_archive_stays_in_the_archive_folder(probe, start_stack, tmp_path):
    archive_dir = tmp_path / "archives"
    start_stack(period_s=3600.0, archive_dir=str(archive_dir),
                nodes=["manifest_verifier", "consolidator"], managed_nodes=["consolidator"])
    probe.wait_identity()
    wait_active(probe, "consolidator")

    def reset(path: str) -> Override.Response:
        return probe.call_signed(Override, "override", Override.Request(
            action=Override.Request.ACTION_RESET_SEMANTIC, reason="start over",
            archive_path=path))
    archive_dir.mkdir(exist_ok=True)
    outside = tmp_path / "elsewhere" / "made" / "archive.json"
    for path in (str(outside), "../escaped.json", "sub/../../escaped.json"):
        refused = reset(path)
        assert not refused.success and refused.reason.startswith("archive_path: "), path
    (archive_dir / "link").symlink_to(tmp_path)
    assert "leads out of the archive folder" in reset("link/escaped.json").reason
    assert not (tmp_path / "elsewhere").exists() and not (tmp_path / "escaped.json").exists()
    done = reset("resets/first.json")
    assert done.success, done.reason
    assert (archive_dir / "resets" / "first.json").is_file()


def cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "robot_memory.cli", *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def as_service_call(srv_type, text: str):
    """The request `ros2 service call` makes of the YAML text `robot-memory sign` prints
    (flat fields: each set by name)."""
    request = srv_type.Request()
    for name, value in yaml.safe_load(text).items():
        setattr(request, name, value)
    return request


def test_the_readme_sequence_a_key_file_and_a_signed_call(probe, start_stack, tmp_path):
    """As the README does it: keygen --operator writes the key and prints its line, the
    nodes read the line from operator_keys_file, `sign` prints the request to pass."""
    key = tmp_path / "operator"
    keys_file = tmp_path / "operator_keys"
    keys_file.write_text(cli("keygen", "--out", str(key), "--operator", "me")
                         .strip().splitlines()[-1] + "\n")
    start_stack(operator_keys=[], operator_keys_file=str(keys_file), period_s=3600.0,
                nodes=["manifest_verifier", "consolidator"], managed_nodes=["consolidator"])
    probe.wait_identity()
    wait_active(probe, "consolidator")
    namespace = ["--namespace", probe.namespace]
    applied = probe.call(Consolidate, "consolidate", as_service_call(
        Consolidate, cli("sign", "consolidate", "--key", str(key), *namespace)))
    assert applied.success, applied.reason
    frozen = probe.call(Override, "override", as_service_call(Override, cli(
        "sign", "override", "--key", str(key), *namespace, "--action", "freeze",
        "--reason", "gripper swap")))
    assert frozen.success, frozen.reason
    wait_until(lambda: (probe.diagnostics.get("consolidator") or {}).get("frozen") == "true",
               10, "the consolidator to report frozen")
    elsewhere = probe.call(Consolidate, "consolidate", as_service_call(
        Consolidate, cli("sign", "consolidate", "--key", str(key))))  # for /consolidate
    assert not elsewhere.success and "credential bad_signature" in elsewhere.reason

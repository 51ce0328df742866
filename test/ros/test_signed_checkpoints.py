"""The verifier process signs checkpoints at boot, on its period and at shutdown; after
kill -9 an honest restart still verifies; a store whose whole chain was recomputed is
refused at boot with the checkpoint and the first divergent seq named; a missing
witness is a WARN, an open key file a refusal."""

import os
import signal
import subprocess
import sys

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from helpers import recompute_chain_from
from std_msgs.msg import String

from robot_memory.operation.bringup import Stack
from robot_memory.msg import IdentityStatus
from robot_memory.ros.qos import CHECKPOINT_QOS, DIAGNOSTICS_QOS
from robot_memory.evidence.witness import generate_key_pair
from ros.conftest import wait_until


def start_verifier(tmp_path, namespace, manifest_file, certified_hash, db_url, **overrides):
    settings = {"database_url": db_url, "manifest_path": str(manifest_file),
                "certified_hash": certified_hash, "full_check_after_boot": False,
                "diagnostics_period_s": 0.2, **overrides}
    log = open(tmp_path / "verifier.log", "ab")
    stack = Stack(settings, namespace=namespace, nodes=["manifest_verifier"])
    stack.start(stdout=log, stderr=log)
    stack.log = log
    return stack


def stop(stack):
    stack.stop()
    stack.log.close()


def witness_lines(path):
    return path.read_text().splitlines() if path.exists() else []


def new_identity_status(probe, state=None, timeout=30.0):
    """The next status after probe.identity was cleared."""
    return wait_until(lambda: probe.identity and (state is None or probe.identity[-1].state
                                                  == state) and probe.identity[-1],
                      timeout, lambda: f"identity_status (got {probe.identity[-1:]})")


def cli_verify(db_url, witness, public_key):
    return subprocess.run([sys.executable, "-m", "robot_memory.cli", "verify", "--db", db_url,
                           "--witness", str(witness), "--public-key", str(public_key)],
                          capture_output=True, text=True, timeout=120)


def test_signed_at_boot_period_shutdown_survives_kill_9_and_catches_a_rewrite(
        probe, tmp_path, namespace, manifest_file, certified_hash, db_url):
    private_key, public_key = generate_key_pair(tmp_path / "robot")
    witness = tmp_path / "witness.jsonl"
    published = []
    probe.create_subscription(String, "memory_checkpoint", published.append, CHECKPOINT_QOS)
    signing = {"checkpoint_key_file": str(private_key), "witness_file": str(witness),
               "checkpoint_period_s": 1.0, "checkpoint_topic": "memory_checkpoint"}
    args = (tmp_path, namespace, manifest_file, certified_hash, db_url)

    stack = start_verifier(*args, **signing)
    assert new_identity_status(probe).state == IdentityStatus.VERIFIED
    wait_until(lambda: len(witness_lines(witness)) >= 2, 30, "a boot and a periodic checkpoint")
    wait_until(lambda: published, 30, "a checkpoint on the latched topic")
    assert published[-1].data in witness_lines(witness)
    os.kill(stack.processes["manifest_verifier"].pid, signal.SIGKILL)
    stop(stack)

    # Honest restart after kill -9: the chain still extends the newest checkpoint.
    probe.identity.clear()
    stack = start_verifier(*args, **signing)
    status = new_identity_status(probe)
    assert status.state == IdentityStatus.VERIFIED, status.reason
    lines = len(witness_lines(witness))
    # Spinning (a periodic checkpoint came): a SIGINT now ends it with a last checkpoint.
    wait_until(lambda: len(witness_lines(witness)) >= lines + 2, 30, "periodic checkpoints")
    before = len(witness_lines(witness))
    stop(stack)
    log = (tmp_path / "verifier.log").read_text(errors="replace")
    assert "signed checkpoint (boot)" in log and "signed checkpoint (period)" in log
    assert "signed checkpoint (shutdown)" in log
    assert len(witness_lines(witness)) > before
    verified = cli_verify(db_url, witness, public_key)
    assert verified.returncode == 0 and "witness" in verified.stdout, verified.stdout

    # Someone with write access recomputes the whole chain after an edit.
    recompute_chain_from(db_url, certified_hash, 1, '{"state":"FORGED"}')
    probe.identity.clear()
    stack = start_verifier(*args, **signing)
    status = new_identity_status(probe)
    stop(stack)
    assert status.state == IdentityStatus.STORE_CORRUPTED
    assert "witness check failed" in status.reason and "first divergent seq" in status.reason
    assert "signed checkpoint seq" in status.reason
    refused = cli_verify(db_url, witness, public_key)
    assert refused.returncode == 1 and "first divergent seq" in refused.stdout


def test_checkpoints_off_by_default_is_ok_and_an_open_key_is_refused(
        probe, tmp_path, namespace, manifest_file, certified_hash, db_url):
    """The default configuration (no key, no witness) is green on /diagnostics: nothing
    needs a human; that signed checkpoints are off is said as a key/value."""
    levels = []
    probe.create_subscription(
        DiagnosticArray, "/diagnostics",
        lambda msg: levels.extend((s.level, s.message, {kv.key: kv.value for kv in s.values})
                                  for s in msg.status
                                  if s.hardware_id == f"/{namespace}/manifest_verifier"),
        DIAGNOSTICS_QOS)
    args = (tmp_path, namespace, manifest_file, certified_hash, db_url)
    stack = start_verifier(*args)
    assert new_identity_status(probe).state == IdentityStatus.VERIFIED
    level, message, values = wait_until(lambda: levels and levels[-1], 30, "/diagnostics")
    stop(stack)
    assert level == DiagnosticStatus.OK, message
    assert values["witness"] == "off"
    assert "signed checkpoints off: checkpoint_key_file and witness_file not set" in \
        values["signed_checkpoints"]

    private_key, _ = generate_key_pair(tmp_path / "robot")
    os.chmod(private_key, 0o644)
    probe.identity.clear()
    stack = start_verifier(*args, checkpoint_key_file=str(private_key),
                           witness_file=str(tmp_path / "w.jsonl"))
    status = new_identity_status(probe)
    stop(stack)
    assert status.state == IdentityStatus.STORE_CORRUPTED
    assert "accessible by group or others (mode 0644)" in status.reason

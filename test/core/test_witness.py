"""Signed checkpoints outside the store: the four attacks that a repaired hash chain
hides (whole chain recomputed, rollback, witness line edited, another robot's witness)
are each caught with a diagnosis, and an honest restart after kill -9 still verifies."""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest
from helpers import recompute_chain_from

from robot_memory.errors import InputError
from robot_memory.store import MemoryStore, NewEvent, check_store
from robot_memory.evidence.witness import (WitnessError, checkpoint_head, generate_key_pair,
                                           load_private_key, load_public_key, read_witness,
                                           verify_witness)

A, B = "a" * 64, "b" * 64


def append(db_url, n, identity=A, start=0):
    store = MemoryStore(db_url)
    store.partition(identity).append_many(
        [NewEvent("execution_result", {"i": start + i}, start + i) for i in range(n)])
    store.close()


def sign(db_url, key_path, witness, identity=A, time_ns=1):
    store = MemoryStore(db_url)
    try:
        return checkpoint_head(store.partition(identity), load_private_key(key_path), witness,
                               time_ns)
    finally:
        store.close()


def verdict(db_url, witness, public_path, identity=A):
    store = MemoryStore(db_url)
    try:
        return verify_witness(store.partition(identity), witness, load_public_key(public_path))
    finally:
        store.close()


@pytest.fixture
def keys(tmp_path):
    return generate_key_pair(tmp_path / "robot_a")


@pytest.fixture
def witnessed(db_url, keys, tmp_path):
    """A store signed at seq 10 and seq 20, then 5 more events (head 25)."""
    witness = tmp_path / "witness.jsonl"
    append(db_url, 10)
    sign(db_url, keys[0], witness, time_ns=10)
    append(db_url, 10, start=10)
    sign(db_url, keys[0], witness, time_ns=20)
    append(db_url, 5, start=20)
    return witness


def test_keygen_writes_owner_only_private_key(keys):
    private_path, public_path = keys
    assert stat.S_IMODE(private_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(public_path.stat().st_mode) == 0o644
    with pytest.raises(WitnessError, match="already exists"):
        generate_key_pair(private_path)


def test_a_key_readable_by_others_is_refused(keys):
    os.chmod(keys[0], 0o640)
    with pytest.raises(WitnessError, match="accessible by group or others.*0640"):
        load_private_key(keys[0])


def test_honest_history_extends_the_newest_checkpoint(db_url, keys, witnessed):
    result = verdict(db_url, witnessed, keys[1])
    assert result.ok, result.message
    assert result.checkpoint.checkpoint.seq == 20 and "head seq 25" in result.message
    lines = witnessed.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["seq"] == 20


def test_attack_whole_chain_recomputed_is_caught(db_url, keys, witnessed):
    assert check_store(db_url, A, record=True).ok
    recompute_chain_from(db_url, A, 14, '{"i":999}')
    # The store on its own is fooled: every hash, the head and the checkpoint agree.
    assert check_store(db_url, A, full=True).ok
    assert check_store(db_url, A).ok
    result = verdict(db_url, witnessed, keys[1])
    assert not result.ok and result.divergent_seq == 20
    assert result.checkpoint.checkpoint.seq == 20
    assert "the store's event at seq 20 is not the one signed" in result.message
    assert "history rewritten after seq 10" in result.message
    assert "first divergent seq 20" in result.message


def test_attack_rollback_to_an_older_copy_is_caught(db_url, keys, tmp_path):
    witness = tmp_path / "witness.jsonl"
    path = db_url.removeprefix("sqlite:///")
    append(db_url, 10)
    sign(db_url, keys[0], witness)
    shutil.copy(path, tmp_path / "old.db")  # closed store: the WAL is folded in
    append(db_url, 10, start=10)
    sign(db_url, keys[0], witness, time_ns=2)
    shutil.copy(tmp_path / "old.db", path)
    assert check_store(db_url, A, full=True).ok  # a consistent, older store
    result = verdict(db_url, witness, keys[1])
    assert not result.ok and result.divergent_seq == 11
    assert "head is seq 10, before signed checkpoint seq 20" in result.message
    assert "rolled back" in result.message


def test_attack_witness_line_edited_is_caught(db_url, keys, witnessed):
    lines = witnessed.read_text().splitlines()
    first = json.loads(lines[0])
    first["seq"] = 9  # a forged, earlier anchor
    witnessed.write_text(json.dumps(first) + "\n" + lines[1] + "\n")
    result = verdict(db_url, witnessed, keys[1])
    assert not result.ok
    assert f"witness {witnessed} line 1: bad signature" in result.message


def test_attack_witness_of_another_robot_is_caught(db_url, keys, tmp_path):
    b_keys = generate_key_pair(tmp_path / "robot_b")
    append(db_url, 5)
    append(db_url, 7, identity=B)
    b_witness = tmp_path / "b.jsonl"
    sign(db_url, b_keys[0], b_witness, identity=B)
    for public in (keys[1], b_keys[1]):  # named as another robot's, whatever the key
        result = verdict(db_url, b_witness, public)
        assert not result.ok
        assert "line 1: signed for identity bbbbbbbbbbbb, not this robot's aaaaaaaaaaaa" \
               " (another robot's witness)" in result.message
    # Robot A's checkpoints signed by robot B's key: the signature fails.
    a_witness = tmp_path / "a.jsonl"
    sign(db_url, b_keys[0], a_witness)
    result = verdict(db_url, a_witness, keys[1])
    assert not result.ok and "bad signature" in result.message


def test_an_empty_witness_is_not_a_pass(db_url, keys, tmp_path):
    append(db_url, 3)
    (tmp_path / "empty.jsonl").write_text("")
    result = verdict(db_url, tmp_path / "empty.jsonl", keys[1])
    assert not result.ok and "no signed checkpoint" in result.message
    with pytest.raises(WitnessError, match="cannot read witness file"):
        verdict(db_url, tmp_path / "missing.jsonl", keys[1])


WRITER = textwrap.dedent("""
    import sys, time
    from robot_memory.store import MemoryStore, NewEvent
    from robot_memory.evidence.witness import checkpoint_head, load_private_key
    store = MemoryStore(sys.argv[1])
    part, key = store.partition("a" * 64), load_private_key(sys.argv[2])
    i = 0
    while True:
        part.append_many([NewEvent("execution_result", {"i": i + j}, i + j) for j in range(20)])
        i += 20
        checkpoint_head(part, key, sys.argv[3], time.time_ns())
""")


def test_honest_restart_after_kill_9_still_verifies(db_url, keys, tmp_path):
    witness = tmp_path / "witness.jsonl"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, db_url, str(keys[0]),
                               str(witness)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
            not witness.exists() or len(witness.read_text().splitlines()) < 5):
        time.sleep(0.05)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=30)
    assert len(witness.read_text().splitlines()) >= 5
    assert check_store(db_url, A, full=True).ok
    result = verdict(db_url, witness, keys[1])
    assert result.ok, result.message
    # The restarted robot appends and signs on top of the same witness.
    append(db_url, 3, start=10_000)
    sign(db_url, keys[0], witness, time_ns=time.time_ns())
    assert verdict(db_url, witness, keys[1]).ok
    assert all(c.checkpoint.identity_hash == A
               for c in read_witness(witness, load_public_key(keys[1]), A))


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "robot_memory.cli", *args],
                          capture_output=True, text=True, timeout=120)


def test_the_command_line_keygen_checkpoint_and_verify(db_url, tmp_path):
    prefix, witness = tmp_path / "keys" / "robot", tmp_path / "witness.jsonl"
    prefix.parent.mkdir()
    made = run_cli("keygen", "--out", str(prefix))
    assert made.returncode == 0 and "mode 0600" in made.stdout, made.stderr
    assert stat.S_IMODE(prefix.stat().st_mode) == 0o600
    append(db_url, 4)
    signed = run_cli("checkpoint", "--key", str(prefix), "--witness", str(witness),
                     "--db", db_url, "--identity", A)
    assert signed.returncode == 0 and "signed checkpoint seq 4" in signed.stdout, signed.stderr
    ok = run_cli("verify", "--db", db_url, "--witness", str(witness),
                 "--public-key", f"{prefix}.pub")
    assert ok.returncode == 0 and "witness" in ok.stdout and "extends" in ok.stdout
    shutil.copy(prefix, tmp_path / "open_key")
    os.chmod(tmp_path / "open_key", 0o604)
    refused = run_cli("checkpoint", "--key", str(tmp_path / "open_key"), "--witness",
                      str(witness), "--db", db_url, "--identity", A)
    assert refused.returncode == InputError.exit_code
    assert "accessible by group or others" in refused.stderr
    again = run_cli("keygen", "--out", str(prefix))
    assert again.returncode == InputError.exit_code and "already exists" in again.stderr


def test_the_boot_check_reads_only_the_newest_lines(db_url, keys, witnessed):
    """Bounded at boot: an edit of an old line is left to `verify --witness` (all lines)."""
    lines = witnessed.read_text().splitlines()
    first = json.loads(lines[0])
    first["time_ns"] += 1
    witnessed.write_text(json.dumps(first) + "\n" + lines[1] + "\n")
    store = MemoryStore(db_url)
    public = load_public_key(keys[1])
    assert verify_witness(store.partition(A), witnessed, public, newest=1).ok
    assert not verify_witness(store.partition(A), witnessed, public).ok
    store.close()

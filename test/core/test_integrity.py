"""Integrity faults made on real SQLite files: the boot check and `verify` refuse with
the right diagnosis (what, where), and never repair anything."""

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from robot_memory.store import MemoryStore, NewEvent, boot_check, check_store, verify_chain

A, B = "a" * 64, "b" * 64


def filled(db_url, n=50, identity=A):
    store = MemoryStore(db_url)
    part = store.partition(identity)
    part.append_many([NewEvent("execution_result", {"i": 100_000 + i, "note": "x" * 40}, i)
                      for i in range(n)])
    store.close()  # the last connection folds the WAL into the file
    return MemoryStore(db_url).partition(identity)


def raw_edit(db_url, *statements):
    """Edit the log the way only an attacker or a broken tool could: triggers dropped
    (MemoryStore puts them back on the next open)."""
    conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
    conn.execute("DROP TRIGGER IF EXISTS events_refuse_update")
    conn.execute("DROP TRIGGER IF EXISTS events_refuse_delete_unpermitted")
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


def event_id(part, seq):
    return next(e.id for e in part.events() if e.seq == seq)


def verify_cli(db_url, *flags):
    return subprocess.run([sys.executable, "-m", "robot_memory.cli", "verify", "--db", db_url,
                           *flags], capture_output=True, text=True, timeout=120)


def test_boot_check_rehashes_only_what_came_after_its_checkpoint(db_url):
    part = filled(db_url, 50)
    first = boot_check(part, sample=5)
    assert first.ok and first.events_checked == 50
    part.append_many([NewEvent("execution_result", {"i": i}, i) for i in range(7)])
    second = boot_check(part, sample=5)
    assert second.ok and second.events_checked == 7 + 5  # the tail and the sample


def test_edited_payload_after_the_checkpoint_is_refused_at_boot(db_url):
    part = filled(db_url, 20)
    assert boot_check(part).ok
    part.append_many([NewEvent("execution_result", {"i": i}, i) for i in range(5)])
    raw_edit(db_url, "UPDATE events SET payload_json='{\"i\":99}' WHERE seq=23")
    report = boot_check(part)
    assert not report.ok and report.bad_seq == 23 and report.bad_event_id == event_id(part, 23)
    assert "edited" in report.reason


def test_old_edit_outside_the_sample_is_caught_by_the_full_check(db_url):
    part = filled(db_url, 60)
    assert boot_check(part, sample=10).ok  # checkpoint at 60; next sample is 1..10
    raw_edit(db_url, "UPDATE events SET payload_json='{\"i\":1}' WHERE seq=40")
    assert boot_check(part, sample=10).ok  # not re-hashed at this boot (documented)
    report = verify_chain(part)
    assert not report.ok and report.bad_seq == 40 and "edited" in report.reason
    result = verify_cli(db_url, "--full")
    assert result.returncode == 1
    assert f"events.id {event_id(part, 40)}" in result.stdout
    assert "STORE CORRUPTED" in result.stdout


def test_the_sample_rotates_through_older_history(db_url):
    part = filled(db_url, 60)
    assert boot_check(part, sample=25).ok
    raw_edit(db_url, "UPDATE events SET payload_json='{\"i\":1}' WHERE seq=40")
    assert boot_check(part, sample=25).ok  # samples 1..25
    report = boot_check(part, sample=25)  # samples 26..50
    assert not report.ok and report.bad_seq == 40


def test_deleted_row_is_refused_at_boot_wherever_it_was(db_url):
    part = filled(db_url, 30)
    assert boot_check(part).ok
    raw_edit(db_url, "DELETE FROM events WHERE seq=3")
    report = boot_check(part)
    assert not report.ok and "30 events but 29 are present" in report.reason
    full = verify_chain(part)
    assert not full.ok and full.bad_seq == 3 and "missing" in full.reason


def test_rewritten_checkpoint_event_is_refused(db_url):
    part = filled(db_url, 10)
    assert boot_check(part).ok
    raw_edit(db_url, "UPDATE events SET event_hash='" + "f" * 64 + "' WHERE seq=10",
             "UPDATE chain_heads SET event_hash='" + "f" * 64 + "'")
    report = boot_check(part)
    assert not report.ok and report.bad_seq == 10
    assert "changed since it was verified" in report.reason


def test_flipped_bytes_in_an_event_are_named(db_url):
    part = filled(db_url, 40)
    path = Path(db_url.removeprefix("sqlite:///"))
    data = bytearray(path.read_bytes())
    at = data.index(b'"i":100017')
    data[at + 5] ^= 0x01  # 100017 -> 110017 ('0' is 0x30, '1' is 0x31)
    path.write_bytes(bytes(data))
    report = check_store(db_url, A)
    assert not report.ok and f"events.id {event_id(part, 18)}" in report.lines[0]
    result = verify_cli(db_url)
    assert result.returncode == 1 and "seq 18" in result.stdout


def test_truncated_file_is_refused_before_it_is_read(db_url):
    filled(db_url, 400)
    path = Path(db_url.removeprefix("sqlite:///"))
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(size // 2)
    verdict = check_store(db_url, A)
    assert not verdict.ok and "truncated" in verdict.lines[0]
    assert str(size // 2) in verdict.lines[0]
    result = verify_cli(db_url, "--full")
    assert result.returncode == 1 and "truncated" in result.stdout


def checkpoint_cut_after_page_one(db_url, tmp_path) -> Path:
    """The files a crash leaves when it lands in a WAL checkpoint: the log's pages are
    in the WAL, and the database file has page 1 (with the grown size) but not the new
    pages at its end. Built by copying the files while a writer holds the WAL open."""
    filled(db_url, 50)
    path = Path(db_url.removeprefix("sqlite:///"))
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_autocheckpoint=0")  # everything new stays in the WAL
    conn.execute("CREATE TABLE ballast (b BLOB)")
    conn.executemany("INSERT INTO ballast VALUES (?)", [(bytes(3000),)] * 40)
    conn.commit()
    crashed = tmp_path / "crashed.db"
    crashed.write_bytes(path.read_bytes())
    wal = Path(f"{path}-wal").read_bytes()
    conn.close()
    Path(f"{crashed}-wal").write_bytes(wal)
    page_size = int.from_bytes(wal[8:12], "big")
    last_page_one = max(i for i in range(32, len(wal), 24 + page_size)
                        if int.from_bytes(wal[i:i + 4], "big") == 1)
    with open(crashed, "r+b") as handle:  # the checkpoint wrote page 1, then died
        handle.write(wal[last_page_one + 24:last_page_one + 24 + page_size])
    return crashed


def test_a_checkpoint_cut_by_a_crash_is_not_a_truncated_store(db_url, tmp_path):
    crashed = checkpoint_cut_after_page_one(db_url, tmp_path)
    header = crashed.read_bytes()[:100]
    assert crashed.stat().st_size < int.from_bytes(header[28:32], "big") * 4096
    as_crashed = crashed.read_bytes()
    url = f"sqlite:///{crashed}"
    verdict = check_store(url, A, full=True)  # SQLite completes it from the WAL
    assert verdict.ok, verdict.lines
    assert len(list(MemoryStore(url).partition(A).events())) == 50
    # Without its WAL, the same file is cut short: refused.
    crashed.write_bytes(as_crashed)
    Path(f"{crashed}-wal").unlink(missing_ok=True)
    verdict = check_store(url, A)
    assert not verdict.ok and "truncated" in verdict.lines[0]


def test_garbage_file_is_not_a_store(tmp_path):
    path = tmp_path / "memory.db"
    path.write_bytes(b"not a database at all" * 10)
    verdict = check_store(f"sqlite:///{path}")
    assert not verdict.ok and "not a SQLite database" in verdict.lines[0]


def test_full_check_passes_an_intact_store_with_two_identities(db_url):
    filled(db_url, 20, A)
    filled(db_url, 5, B)
    result = verify_cli(db_url, "--full")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "integrity_check: ok" in result.stdout and result.stdout.count("chain intact") == 2


@pytest.mark.parametrize("fault", ["edit", "delete"])
def test_cli_boot_check_names_the_fault_and_writes_nothing(db_url, fault):
    part = filled(db_url, 12)
    statement = {"edit": "UPDATE events SET payload_json='{}' WHERE seq=12",
                 "delete": "DELETE FROM events WHERE seq=12"}[fault]
    raw_edit(db_url, statement)
    result = verify_cli(db_url, "--identity", A)
    assert result.returncode == 1 and "STORE CORRUPTED" in result.stdout
    assert part.count_events() == (12 if fault == "edit" else 11)

"""Compressed archive segments: what compactions write now is one zstd frame whose
stored bytes the compaction's SHA-256 covers; segments in the older uncompressed format
still read and verify, beside compressed ones in the same chain; and a compressed segment
that is truncated, corrupted or padded is a SegmentError naming the file and what is
wrong, on every path that reads segments. Real SQLite stores, real segment files."""

import subprocess
import sys

import pytest
from helpers import result_event

from robot_memory.consolidation import RulesConfig, consolidation_pass
from robot_memory.event_kinds import EXECUTION_RESULT
from robot_memory.retention.archives import (archived_seq, history_events, verify_archives,
                                             whole_history)
from robot_memory.retention.compaction import CompactionError, compact, compactable_until
from robot_memory.retention.segments import (FORMAT, FORMAT_PLAIN, SegmentError, file_sha256,
                                             read_segment)
from robot_memory.store import MemoryStore, compactions

IDENT = "d" * 64
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def batch(partition, first: int, n: int) -> None:
    partition.append_many([result_event(first + i, success=i % 4 != 0, force=float(i % 5),
                                        target=f"object_{i % 3}", reason="slipped")
                           for i in range(n)])
    consolidation_pass(partition, RulesConfig())


def found(partition):
    with partition.store.read() as conn:
        return compactions(partition.identity_hash, conn)


@pytest.fixture
def mixed(tmp_path):
    """A chain whose first segment is in the old uncompressed format (written by the
    kept path, compressed=False) and whose next two are compressed."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    partition = MemoryStore(url).partition(IDENT)
    archive = tmp_path / "segments"
    for number in range(4):
        batch(partition, 1000 + 300 * number, 300)
        if number < 3:
            assert compact(partition, compactable_until(partition), archive,
                           compressed=number > 0).compaction
    return partition, archive, url


def test_new_segments_are_compressed_and_hashed_as_stored(mixed):
    partition, archive, _ = mixed
    old, *new = found(partition)
    assert old.segment.endswith(".segment.jsonl") and not old.segment.endswith(".zst")
    assert (archive / old.segment).read_bytes().startswith(b'{"')
    assert all(c.segment.endswith(".segment.jsonl.zst") for c in new)
    for c in new:
        path = archive / c.segment
        assert path.read_bytes().startswith(ZSTD_MAGIC)
        assert file_sha256(path) == c.segment_sha256  # the bytes as stored
        header, rows, trailer = read_segment(path)
        assert header["format"] == FORMAT
        assert [row.seq for row in rows] == list(range(c.from_seq, c.until_seq + 1))
        assert trailer["cut_hash"] == c.cut_hash
    assert read_segment(archive / old.segment)[0]["format"] == FORMAT_PLAIN


def test_old_and_compressed_segments_verify_and_read_back_together(mixed, tmp_path):
    partition, archive, url = mixed
    report = verify_archives(partition, archive)
    assert report.ok and report.segments == 3, report.describe()
    assert report.events_checked == sum(c.until_seq - c.from_seq + 1 for c in found(partition))
    # Every result, across both formats and the live chain, in chain order.
    seqs = [e.seq for e in history_events(partition, archive, [EXECUTION_RESULT])]
    assert len(seqs) == 1200 and seqs == sorted(seqs)
    rebuilt = whole_history(partition, archive, f"sqlite:///{tmp_path / 'scratch.db'}")
    assert rebuilt.head() == partition.head()  # the same chain, hash for hash
    out = subprocess.run([sys.executable, "-m", "robot_memory.cli", "verify", "--db", url,
                          "--full", "--archives", str(archive)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "3 archive segment(s) intact" in out.stdout


def test_compression_makes_segments_several_times_smaller(tmp_path):
    sizes = {}
    for compressed in (False, True):
        partition = MemoryStore(f"sqlite:///{tmp_path / f'{compressed}.db'}").partition(IDENT)
        batch(partition, 1000, 2000)
        c = compact(partition, compactable_until(partition), tmp_path / str(compressed),
                    compressed=compressed).compaction
        sizes[compressed] = (tmp_path / str(compressed) / c.segment).stat().st_size
    assert sizes[True] * 4 < sizes[False], sizes


def damage(path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif how == "checksum_cut":  # the lines whole, the frame's end (its checksum) cut
        path.write_bytes(data[:-2])
    elif how == "corrupted":
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(flipped))
    elif how == "padded":
        path.write_bytes(data + b"more bytes")
    else:
        path.write_bytes(b"not zstd at all\n")


@pytest.mark.parametrize("how, words", [("truncated", "truncated"),
                                        ("checksum_cut", "truncated"),
                                        ("corrupted", "zstd frame"),
                                        ("padded", "follow the end of its zstd frame"),
                                        ("garbage", "zstd frame")])
def test_a_damaged_compressed_segment_is_a_segment_error_naming_it(mixed, how, words):
    partition, archive, _ = mixed
    second = found(partition)[1]
    path = archive / second.segment
    damage(path, how)
    with pytest.raises(SegmentError) as raised:
        header, rows, _ = read_segment(path)
        for _ in rows:
            pass
    assert str(path) in str(raised.value) and words in str(raised.value)
    # The readers of history check the hash first, and name the segment.
    with pytest.raises(CompactionError, match=second.segment):
        archived_seq(partition, archive, second.last_event_id)
    # verify --archives names the segment (its hash no longer matches) and goes no further.
    report = verify_archives(partition, archive)
    assert not report.ok and second.segment in report.problem


def test_a_compressed_segment_under_another_format_tag_is_refused(mixed, tmp_path):
    partition, archive, _ = mixed
    old = found(partition)[0]
    renamed = tmp_path / (old.segment + ".zst")  # plain lines under a compressed name
    renamed.write_bytes((archive / old.segment).read_bytes())
    with pytest.raises(SegmentError, match="zstd frame"):
        read_segment(renamed)

"""kill -9 at any point of a compaction, with appends going on, leaves the store before
or after it: the chain and the segments verify, and nothing acknowledged is lost.
A real process per round, killed at a random moment."""

import os
import random
import signal
import subprocess
import sys
import time

from robot_memory.retention.archives import verify_archives
from robot_memory.store import MemoryStore, boot_check, verify_chain

IDENT = "e" * 64
WORKER = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from helpers import result_event
from robot_memory.retention.compaction import compact, compactable_until
from robot_memory.consolidation import consolidation_pass
from robot_memory.store import MemoryStore
partition = MemoryStore(sys.argv[1]).partition("e" * 64)
archive = Path(sys.argv[2])
round_ = 0
while True:
    round_ += 1
    stored = partition.append_many([result_event(round_ * 100 + i, success=i % 3 != 0,
                                                 target=f"cup_{i % 4}") for i in range(40)])
    print("acked", stored[-1].seq, flush=True)
    consolidation_pass(partition)
    compact(partition, compactable_until(partition) - 20, archive)
"""


def test_kill_9_during_compactions_loses_nothing_and_verifies(tmp_path):
    url, archive = f"sqlite:///{tmp_path / 'm.db'}", tmp_path / "segments"
    helpers = os.path.join(os.path.dirname(__file__), "..")
    rng, acked = random.Random(7), 0
    for _ in range(6):
        worker = subprocess.Popen([sys.executable, "-c", WORKER, url, str(archive), helpers],
                                  stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + rng.uniform(1.0, 3.0)
        while time.monotonic() < deadline:
            line = worker.stdout.readline()
            if line.startswith("acked"):
                acked = max(acked, int(line.split()[1]))
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        store = MemoryStore(url)
        try:
            partition = store.partition(IDENT)
            assert partition.head()[0] >= acked  # nothing acknowledged was lost
            report = verify_chain(partition)
            assert report.ok, report.describe()
            assert boot_check(partition).ok
            archives = verify_archives(partition, archive)
            assert archives.ok, archives.describe()
        finally:
            store.close()
    assert archives.segments >= 2  # compactions did run between the kills

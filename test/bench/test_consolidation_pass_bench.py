"""bench.consolidation_pass's store-work-only measurement does the pass's own writes: a
store it ran on holds the same facts as one a real pass ran on."""

import shutil

from bench import consolidation_pass as bench
from bench.stores import KeySpace, append_results
from robot_memory.consolidation import consolidation_pass, facts_snapshot
from robot_memory.store import MemoryStore


def test_store_work_commits_exactly_the_pass_it_stands_for(tmp_path):
    keys = KeySpace.for_facts(40)
    url = f"sqlite:///{tmp_path / 'a.db'}"
    MemoryStore(url).close()
    append_results(url, 0, 600, keys)
    first = bench.open_partition(url)
    consolidation_pass(first)  # a consolidated store, then new results on it
    first.store.close()
    append_results(url, 600, 300, keys)
    shutil.copy(tmp_path / "a.db", tmp_path / "b.db")

    measured = bench.open_partition(url)
    read_s, write_s = bench.store_work_seconds(measured)
    real = bench.open_partition(f"sqlite:///{tmp_path / 'b.db'}")
    report = consolidation_pass(real)
    assert read_s > 0 and write_s > 0 and report.facts_touched > 0
    assert facts_snapshot(measured) == facts_snapshot(real)
    assert measured.head()[0] == real.head()[0]  # the run event is there too
    assert consolidation_pass(measured).events_read == 0  # the checkpoint moved past it
    for partition in (measured, real):
        partition.store.close()

"""Synthetic stores for the benchmarks, built once and cached under bench/.cache/.

Events are valid execution results spread over `keys` (skill, target, environment)
combinations, one per 0.1 s of event time, 70% successes.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from robot_memory.consolidation import consolidation_pass
from robot_memory.manifest import load_manifest
from robot_memory.store import MemoryStore, NewEvent

CACHE = Path(__file__).resolve().parent / ".cache"
MANIFEST = Path(__file__).resolve().parent.parent / "robot_memory" / "config" / \
    "example_manifest.yaml"
IDENTITY = load_manifest(MANIFEST).identity_hash()
ENVIRONMENTS = ("env_0", "env_1")


def result(i: int, targets: int, t0: float = 0.0) -> NewEvent:
    target = f"object_{(i // len(ENVIRONMENTS)) % targets}"
    success = (i * 7919) % 10 < 7
    payload = {"skill_id": "manipulation.grasp", "target_class": target,
               "environment": ENVIRONMENTS[i % len(ENVIRONMENTS)], "zone": "",
               "parameters": {"force_n": float(5 * (i % 6))},
               "observations": {"mass_kg": (i % 13) / 10.0}, "success": success,
               "failure_reason": "" if success else "slipped", "duration_s": 2.0,
               "intent_id": "", "notes": ""}
    return NewEvent("execution_result", payload, int((t0 + i * 0.1) * 1e9))


def append_results(url: str, start: int, count: int, targets: int, batch: int = 20000) -> None:
    partition = MemoryStore(url).partition(IDENTITY)
    for first in range(start, start + count, batch):
        last = min(first + batch, start + count)
        partition.append_many([result(i, targets) for i in range(first, last)])


def cached_store(events: int, targets: int, consolidated: bool = True) -> Path:
    """Path of a SQLite file holding `events` results (and their facts), built if absent."""
    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"store_{events}_{targets}{'_facts' if consolidated else ''}.db"
    if path.exists():
        return path
    building = path.with_suffix(".building")
    for leftover in CACHE.glob(building.name + "*"):
        leftover.unlink()
    url = f"sqlite:///{building}"
    started = time.perf_counter()
    append_results(url, 0, events, targets)
    if consolidated:
        consolidation_pass(MemoryStore(url).partition(IDENTITY))
    MemoryStore(url).engine.dispose()
    with MemoryStore(url).engine.connect() as conn:  # fold the WAL in before renaming
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.move(building, path)
    print(f"built {path.name} in {time.perf_counter() - started:.1f} s", flush=True)
    return path


def working_copy(path: Path, directory: Path) -> str:
    """A scratch copy of a cached store (benchmarks write to it); returns its URL."""
    target = directory / path.name
    shutil.copy(path, target)
    return f"sqlite:///{target}"

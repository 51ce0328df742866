"""Synthetic stores for the benchmarks, built once and cached under bench/.cache/.

Events are valid execution results (the payload shape ExecutionRecord.payload() stores)
cycling over a key space sized so that one consolidation pass yields about `facts`
facts. Each key sees 70% successes, a few force values and a few measured masses, so
every rule of v1 has work to do. Building goes through Partition.append_many, like the
logger, so the hash chain is real.

A spread key space (KeySpace(targets, spread=True), for analogies) measures two
properties per target, spread so that nearly every target differs from every other; the
default one measures one mass of 20 values, the shape every store was first built with.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robot_memory.consolidation import consolidation_pass
from robot_memory.consolidation.rules import DEFAULT_RULE_VERSION, RulesConfig
from robot_memory.consolidation.rules.timeline import TIMELINE_LAYOUT
from robot_memory.event_kinds import EXECUTION_RESULT
from robot_memory.manifest import load_manifest
from robot_memory.intake.records import validate_record
from robot_memory.store import MemoryStore, NewEvent

CACHE = Path(__file__).resolve().parent / ".cache"
MANIFEST = Path(__file__).resolve().parent.parent / "robot_memory" / "config" / \
    "example_manifest.yaml"
IDENTITY = load_manifest(MANIFEST).identity_hash()

# Bump when the generated events change: cached stores carry it in their name.
GENERATOR = "g8"  # g6: schema 3 (rollups); g7: schema 4 (rollups by block); g8: schema 5
SKILLS = ("manipulation.grasp", "manipulation.place")
ENVIRONMENTS = ("env_0", "env_1")
FAILURE_REASON = "slipped"
# Fixed event time (2026-01-01 UTC, one result per 0.1 s) so a cached store never ages.
T0_NS = 1_767_225_600 * 10**9
SPACING_NS = 100_000_000
APPEND_BATCH = 20_000

# Facts one target yields: a success rate per skill and environment, a failure pattern
# per skill (one failure reason) and one object property; zone_risk adds one per env.
FACTS_PER_TARGET = len(SKILLS) * len(ENVIRONMENTS) + len(SKILLS) + 1
# What a target of a spread key space is measured on: two properties give the
# similar-case search more than one column to compare.
SPREAD_PROPERTIES = ("mass_kg", "width_m")
# Irrational steps: target t's values are frac(t x step), spread evenly over [0, 1) and
# distinct for every t, without a random generator whose stream could change.
SPREAD_STEPS = (0.6180339887498949, 0.4142135623730951)
SPREAD_RANGES = ((0.05, 5.0), (0.02, 0.5))  # (low, width) of each property


@dataclass(frozen=True)
class KeySpace:
    """skill x target x environment combinations; event i goes to combination i % size."""

    targets: int
    # True: SPREAD_PROPERTIES measured on each target (analogies); False: one mass of 20
    # values, as every store built before (their events and cache names stay as they were).
    spread: bool = False

    @classmethod
    def for_facts(cls, facts: int) -> KeySpace:
        return cls(max(1, round((facts - len(ENVIRONMENTS)) / FACTS_PER_TARGET)))

    @property
    def size(self) -> int:
        return self.targets * len(SKILLS) * len(ENVIRONMENTS)

    @property
    def expected_facts(self) -> int:
        extra_properties = len(SPREAD_PROPERTIES) - 1 if self.spread else 0
        return self.targets * (FACTS_PER_TARGET + extra_properties) + len(ENVIRONMENTS)

    def split(self, combo: int) -> tuple[str, int, str]:
        """(skill, target number, environment) of one combination."""
        environment = ENVIRONMENTS[combo % len(ENVIRONMENTS)]
        rest = combo // len(ENVIRONMENTS)
        return SKILLS[rest % len(SKILLS)], rest // len(SKILLS), environment

    def request_key(self) -> tuple[str, str, str]:
        """A (skill, target, environment) that has facts once a store is consolidated."""
        skill, target, environment = self.split(min(42, self.size - 1))
        return skill, f"object_{target}", environment


def spread_properties(target: int) -> dict[str, float]:
    """A spread key space's target: the value each property's object_property fact will
    have as its median (the observations scatter around it, round by round)."""
    return {name: round(low + width * ((target * step) % 1.0), 6)
            for name, step, (low, width) in zip(SPREAD_PROPERTIES, SPREAD_STEPS, SPREAD_RANGES)}


def observations(target: int, round_: int, keys: KeySpace) -> dict[str, float]:
    """What a result measured: a few values around each property's centre, by round."""
    jitter = (round_ % 5 - 2) / 100
    if not keys.spread:
        return {"mass_kg": 0.1 + (target % 20) / 10 + jitter}
    return {name: centre * (1 + jitter) for name, centre in spread_properties(target).items()}


def payload(i: int, keys: KeySpace) -> dict[str, Any]:
    """The i-th result. Each key's outcome cycles with the round (7 of 10 succeed), so
    every key gets successes and failures whatever the key-space size."""
    combo, round_ = i % keys.size, i // keys.size
    skill, target, environment = keys.split(combo)
    success = (round_ * 7 + combo * 3) % 10 < 7
    return {"skill_id": skill, "target_class": f"object_{target}", "environment": environment,
            "zone": "", "parameters": {"force_n": 5.0 * (1 + (round_ + combo) % 6)},
            "observations": observations(target, round_, keys),
            "success": success, "failure_reason": "" if success else FAILURE_REASON,
            "duration_s": 2.0 + (combo % 7) / 10, "intent_id": "", "notes": ""}


def stamp_ns(i: int) -> int:
    return T0_NS + i * SPACING_NS


def append_results(url: str, start: int, count: int, keys: KeySpace) -> None:
    """Append results start .. start+count-1, in batches (one transaction each)."""
    validate_record({**payload(start, keys), "stamp_ns": stamp_ns(start)})  # shape check
    store = MemoryStore(url)
    partition = store.partition(IDENTITY)
    for first in range(start, start + count, APPEND_BATCH):
        last = min(first + APPEND_BATCH, start + count)
        partition.append_many([NewEvent(EXECUTION_RESULT, payload(i, keys), stamp_ns(i))
                               for i in range(first, last)])
    store.close()


def cached_store(events: int, facts: int, consolidated: bool = True,
                 spread_targets: int = 0) -> Path:
    """Path of a SQLite file holding `events` results over a key space of ~`facts` facts
    (and, if consolidated, the facts of one pass over them); built if absent. With
    spread_targets, the key space is KeySpace(spread_targets, spread=True) instead and
    `facts` is ignored."""
    CACHE.mkdir(exist_ok=True)
    shape = f"targets{spread_targets}_spread" if spread_targets else f"facts{facts}"
    # A consolidated store holds states as this code writes them (the layout in its name)
    # and a run that records the tier's digest ("d": a store without one is not reused),
    # made by the default rules (their version in its name from v2.0 on: a store keeps
    # the version of its states, so one of v1.0 would go on being consolidated with v1.0),
    # and for v2.0 the width of its band buckets (band_bucket_s, whole seconds).
    rules = "" if DEFAULT_RULE_VERSION == "v1.0" else \
        f"_{DEFAULT_RULE_VERSION}_b{int(RulesConfig().band_bucket_s)}"
    name = (f"{GENERATOR}_events{events}_{shape}"
            f"{f'_consolidated_t{TIMELINE_LAYOUT}d{rules}' if consolidated else ''}")
    path = CACHE / f"{name}.db"
    if path.exists():
        return path
    building = CACHE / f"{name}.building"
    for leftover in CACHE.glob(f"{name}.building*"):
        leftover.unlink()
    started = time.perf_counter()
    url = f"sqlite:///{building}"
    if consolidated:  # the facts are a pass over the raw store: reuse it
        shutil.copy(cached_store(events, facts, consolidated=False,
                                 spread_targets=spread_targets), building)
        store = MemoryStore(url)
        consolidation_pass(store.partition(IDENTITY))
        store.close()
    else:
        keys = KeySpace(spread_targets, spread=True) if spread_targets else \
            KeySpace.for_facts(facts)
        append_results(url, 0, events, keys)
    _fold_wal(building)
    building.rename(path)
    print(f"built {path.name} in {time.perf_counter() - started:.0f} s", flush=True)
    return path


def _fold_wal(path: Path) -> None:
    """Move the WAL into the main file, so copying the .db file alone copies everything."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def working_copy(path: Path, directory: Path) -> str:
    """A scratch copy of a cached store (benchmarks write to it); returns its URL."""
    target = directory / path.name
    shutil.copy(path, target)
    # Written back to disk now: otherwise the first fsync inside the timed code (SQLite's
    # checkpoint when its last connection closes) pays for the whole copy.
    with open(target, "rb+") as copied:
        os.fsync(copied.fileno())
    return f"sqlite:///{target}"

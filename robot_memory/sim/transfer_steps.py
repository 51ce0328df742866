"""What the transfer experiments record: one held-out episode in one arm, the learned
robot every experiment starts from, a paired run and what experiments share."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from robot_memory.sim.episodes import Episode
from robot_memory.sim.run_sim import Attempted


@dataclass(frozen=True)
class TransferStep(Attempted):
    """One held-out episode in one arm: what `ground` answered and what happened."""

    episode: int
    target: str
    status: str  # of the answer: OK (the robot's own fact), ANALOGY, ABSTAIN
    reason_code: str
    lent_from: str  # BORROW: the known target whose recommended force was used
    distance: float | None  # the nearest analogy's distance, with ANALOGY
    measured_mass_kg: float  # the scale's reading sent as target_properties (0: not sent)
    action: str
    force_n: float
    success: bool
    failure_reason: str
    why: str


@dataclass(frozen=True)
class LearnedMemory:
    """A robot that has learned the closed loop's objects: its store (copied for each
    arm, never run on), its manifest and certified hash, where its sim clock ended and
    how many attempts its facts cover."""

    db_path: Path
    manifest: Path
    certified_hash_file: Path
    end_sim_s: float
    observations: int
    episodes: int
    facts: dict


@dataclass
class PairedRun:
    """The same held-out stream run twice: `without` (the baseline arm) and `with_`."""

    key: str  # the JSON key, e.g. "analogies"
    question: str
    without_label: str
    with_label: str
    stream: list[Episode]
    without: list[TransferStep]
    with_: list[TransferStep]
    notes: dict = field(default_factory=dict)


@dataclass
class Context:
    """What every experiment shares: the learned robot and the run's settings."""

    learned: LearnedMemory
    seed: int
    block: int
    workdir: Path
    log: object
    timings: dict
    similar_episodes: int
    misleading_episodes: int
    joiner_episodes: int = 24  # experiment (b): the second robot's episodes

"""What the grounding server answers from, ROS-free: the index of the identity's facts,
kept current with the passes' deltas, and the fleet priors.

The grounding server (ros/grounding_server.py) wires its topics, services and timers to
these: a ServedIndex is loaded from the store when the node is configured, patched with
each `facts_delta` and swapped in with one assignment (`ground` reads `index` once per
request, and never waits for a writer); a delta that does not follow the run the index
reflects means one was missed, and the index is loaded again from the store (off the
request path). `catch_up` finds a pass whose delta never came (delta_watch.py).
`priors_for_identity` reads the fleet's facts once the node is configured.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from robot_memory.consolidation.checkpoint import read_checkpoint
from robot_memory.errors import InputError
from robot_memory.grounding.analogies import AnalogySettings
from robot_memory.grounding.delta_watch import LostDeltaWatch
from robot_memory.grounding.index import GroundingIndex
from robot_memory.grounding.priors import PriorIndex, PriorSettings
from robot_memory.grounding.priors_sources import load_priors
from robot_memory.manifest import load_manifest
from robot_memory.operation.heap import release_freed_memory
from robot_memory.store import FactRow, Partition

Log = Callable[[str, str], None]  # (level "warning" | "error" | "info", text)


def _default_log(level: str, text: str) -> None:
    getattr(logging.getLogger("robot_memory.grounding.serving"), level)(text)


class FactsDelta(Protocol):
    """A pass's delta as the facts_delta topic carries it, read into FactRows."""

    identity_hash: str
    run_event_id: int
    previous_run_event_id: int
    facts: Iterable[FactRow]


class ServedIndex:
    """The GroundingIndex `ground` answers from (None until a partition is attached),
    the run it reflects, and how it follows the passes. One writer at a time (a lock);
    readers take `index` as it is."""

    def __init__(self, analogy_settings: AnalogySettings, log: Log = _default_log,
                 stale_half_life_s: float = 0.0):
        self.analogy_settings = analogy_settings
        self.stale_half_life_s = stale_half_life_s  # GroundingIndex's staleness decay
        self.index: GroundingIndex | None = None
        self.partition: Partition | None = None
        self.run_event_id = 0  # the run the index reflects
        self.reloads = 0
        # Facts named as left out, (kind, key, why): each logged once per process.
        self.logged_left_out: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()
        self._lost_deltas = LostDeltaWatch()
        self._log = log

    def attach(self, partition: Partition) -> None:
        """Take the partition and load the index from it."""
        self.partition = partition
        self.reload()

    def detach(self) -> Partition | None:
        """Let go of the index and the partition (the caller closes its store); under the
        lock, so a reload in progress does not bring them back."""
        with self._lock:
            partition, self.partition = self.partition, None
            self.index = None
        return partition

    def reload(self) -> None:
        """Load every fact at the newest run from the store into a new index."""
        with self._lock:
            partition = self.partition
            if partition is None:  # detached since this reload was asked for
                return
            with partition.store.read() as conn:
                self.run_event_id = read_checkpoint(partition, conn).run_event_id
                facts = partition.facts(conn=conn)
            index = GroundingIndex(partition.identity_hash, facts,
                                   stale_half_life_s=self.stale_half_life_s)
            if self.analogy_settings.enabled:  # built here, not by the first request
                index.known_properties()
            self.index = index
            self.reloads += 1
            del facts
        self._log_left_out(index)
        release_freed_memory()  # the rows the index was built from
        # The index is long-lived: keep the cyclic collector from re-scanning it.
        gc.freeze()

    def apply_delta(self, delta: FactsDelta) -> None:
        """Patch the index with a pass's delta: one of another identity, or one already
        reflected, is ignored; one that does not follow the reflected run reloads."""
        current = self.index
        if current is None or delta.identity_hash != current.identity_hash:
            return
        if delta.run_event_id <= self.run_event_id:
            return  # already reflected (e.g. loaded from the store after this pass)
        if delta.previous_run_event_id != self.run_event_id:
            self._log("warning", f"missed a facts delta (have run {self.run_event_id}, "
                                 f"delta follows {delta.previous_run_event_id}); reloading")
            self.reload()
            return
        with self._lock:
            if self.index is current:
                self.index = current.with_changes(delta.facts)
                self.run_event_id = delta.run_event_id
        index = self.index
        if index is not None and index.left_out:
            self._log_left_out(index)

    def catch_up(self) -> None:
        """A delta lost on the way (published before the subscription matched the
        consolidator's new publisher: the topic is volatile) would leave the index
        behind until the next pass. Called now and then, this reads the store's newest
        run, and loads a run still missing one call later (not merely in flight)."""
        partition = self.partition
        if self.index is None or partition is None:
            return
        with partition.store.read() as conn:
            newest = read_checkpoint(partition, conn).run_event_id
        lost = self._lost_deltas.check(newest, self.run_event_id)
        if lost:
            self._log("warning", f"no facts delta for run {lost} (have run "
                                 f"{self.run_event_id}); reloading from the store")
            self.reload()

    def first_notice(self, kind: str, key: str, why: str) -> bool:
        """True the first time this fact is named as left out (for why), else False."""
        if (kind, key, why) in self.logged_left_out:
            return False
        self.logged_left_out.add((kind, key, why))
        return True

    def _log_left_out(self, index: GroundingIndex) -> None:
        """Name each fact the index left out (fact_schemas.py), once per process."""
        for (kind, key), why in list(index.left_out.items()):
            if self.first_notice(kind, key, why):
                self._log("warning", f"fact {kind} [{key}] left out of the index, not "
                                     f"served: {why}")


def priors_for_identity(sources: Iterable[str], identity_hash: str, manifest_path: str | Path,
                        settings: PriorSettings, log: Log = _default_log
                        ) -> tuple[PriorIndex, list[str]]:
    """The fleet's facts from `sources`, each source checked against this robot's
    embodiment, read from the manifest at `manifest_path` (which must still hash to the
    verified identity); and why each refused source was refused (each logged)."""
    sources = list(sources)
    refused: list[str] = []
    priors = PriorIndex((), settings)
    if not sources:
        return priors, refused
    try:
        manifest = load_manifest(manifest_path)
        if manifest.identity_hash() != identity_hash:
            raise InputError(f"manifest {manifest_path} no longer hashes to the verified "
                             f"identity {identity_hash}")
    except InputError as exc:
        refused = [f"every priors source: this robot's embodiment is unknown: {exc}"]
    else:
        loaded = load_priors(sources, identity_hash, manifest.embodiment)
        refused = loaded.refused
        priors = PriorIndex(loaded.facts, settings)
        log("info", f"priors: {priors.size} facts of {len(priors.identities)} robot(s) of "
                    f"embodiment {manifest.embodiment!r}")
    for why in refused:
        log("error", f"priors source refused: {why}")
    return priors, refused

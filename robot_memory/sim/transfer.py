"""`make sim`, second part: does what the robot knows carry over to objects it never handled?

Every experiment starts from the same robot: one that has learned the closed loop's
objects (`learn_known_objects`: the memory loop of run_sim over the first episodes of
its stream). Then objects held out of that loop (scene.HELD_OUT) appear, one after
another, each for a segment of episodes (episodes.held_out_episodes). Every experiment
runs that held-out stream twice from copies of the learned store, with a feature and
without it, so each episode (object, jitter, exploratory force) is the same in both
arms: a paired comparison, reported as unproductive (failed) attempts and their
reduction with a paired BCa bootstrap CI over episodes, as run_sim does.

- analogies: the planner asks `ground` with `allow_analogies` and the object's weight
  read by a scale in the table (`target_properties`). For an object it has no fact of,
  an ANALOGY answer lends the facts of the nearest known object, and the planner
  explores with that object's recommended force (policy.borrow); it keeps that force
  while `ground` answers ABSTAIN only_candidates (its first attempts consolidated, but
  too few to be served). Without analogies it explores with the episode's force until
  its own facts answer. With them, each object's segment runs on a fresh copy of the
  learned store, so one held-out object is never lent to another.
- misleading: the crystal glass weighs what the glass cup weighs, but the cup's force
  cracks it. Reported under its own key: the borrowed failures, and how many attempts
  it took until `ground` served the robot's own fact of it and until a grasp held.

Between blocks of episodes the robot waits for a consolidation pass, as in run_sim, but
here the pass is requested at the block's end (the `consolidate` service; the timer is
off), so that what the robot knows at each episode, and with it the whole result, is
the same in every run of one seed. A block never spans two objects.

An experiment is a function of a `Context` that returns `PairedRun`s (the experiment,
then its misleading case); `report_run` turns one into its JSON block and `plot` into a
panel, so a new experiment is one more function in EXPERIMENTS.
"""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import rclpy
from scipy.stats import bootstrap

from robot_memory.bringup import Stack
from robot_memory.manifest import load_manifest
from robot_memory.msg import IdentityStatus
from robot_memory.srv import Consolidate
from robot_memory.ros.matching import wait_for_subscriber
from robot_memory.sim.grasp_skill import ENVIRONMENT
from robot_memory.sim.episodes import Episode, episodes, held_out_episodes
from robot_memory.sim.policy import ANALOGY, BORROW, SKIP
from robot_memory.sim.run_sim import (BOOTSTRAP, DEFAULT_SEED, EXAMPLE_MANIFEST, Nodes,
                                      _say, _wait, reduction_with_ci, run_episode)
from robot_memory.sim.scene import HELD_OUT, OBJECTS

SIMILAR = ("glass_jar", "tea_glass", "stoneware_mug")  # each resembles a known object
MISLEADING = "crystal_glass"  # weighs what glass_cup weighs; glass_cup's force cracks it
HELD_OUT_SEED_OFFSET = 1  # the held-out stream's seed: the run's seed + this


@dataclass(frozen=True)
class TransferStep:
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

    @property
    def attempted(self) -> bool:
        return self.action != SKIP

    @property
    def unproductive(self) -> bool:
        return self.attempted and not self.success


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


# Passes only when requested: no timer pass within a run, none for a backlog.
ON_REQUEST = {"period_s": 86400.0, "pass_after_new_events": 0}


def start_stack(db_path: Path, manifest: Path, certified_hash_file: Path, log) -> Stack:
    return Stack({"database_url": f"sqlite:///{db_path}", "manifest_path": str(manifest),
                  "certified_hash_file": str(certified_hash_file), **ON_REQUEST},
                 use_sim_time=True).start(stdout=log, stderr=log)


def consolidate(nodes: Nodes, client, covered: int, timeout_s: float = 60.0) -> None:
    """Request passes until the facts cover `covered` attempts (the logger may not have
    stored the last results when a pass starts: then the next pass takes them)."""
    deadline = time.monotonic() + timeout_s
    while nodes.planner.observations_in_memory() < covered:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no pass covered {covered} attempts in {timeout_s} s")
        future = client.call_async(Consolidate.Request(dry_run=False))
        _wait(future.done, timeout_s, "the consolidate service's answer")
        if not future.result().success:
            raise RuntimeError(f"consolidate refused: {future.result().reason}")
        try:  # the facts snapshot follows the pass
            _wait(lambda: nodes.planner.observations_in_memory() >= covered, 0.5, "facts")
        except TimeoutError:
            pass


def consolidate_client(nodes: Nodes):
    client = nodes.planner.create_client(Consolidate, "consolidate")
    _wait(lambda: client.wait_for_service(0.1), 60, "the 'consolidate' service")
    time.sleep(0.5)  # let the server's side match this client too
    return client


def wait_ready(nodes: Nodes, observations: int) -> None:
    """Identity verified, `ground` answering, the logger subscribed, and the facts
    snapshot (covering `observations` attempts) received."""
    _wait(lambda: nodes.identity is not None, 60, "manifest_verifier's identity_status")
    if nodes.identity.state != IdentityStatus.VERIFIED:
        raise RuntimeError(f"identity not verified: {nodes.identity.reason}")
    _wait(lambda: nodes.planner.grounding.wait_for_service(0.1), 60, "the 'ground' service")
    _wait(lambda: nodes.planner.grounding.query("manipulation.grasp").status
          != "IDENTITY_UNVERIFIED", 60, "the memory nodes to activate")
    if not wait_for_subscriber(nodes.skill.results, 60):
        raise TimeoutError("episodic_logger did not subscribe to execution_results")
    _wait(lambda: nodes.planner.observations_in_memory() >= observations, 60,
          f"the facts covering the {observations} learned attempts")


def copy_store(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite store (the backup API: the log's pages included)."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


def _facts_summary(nodes: Nodes) -> dict:
    """What the learned robot knows: each known object's recommended force and rate, and
    its measured mass (the property analogies compare)."""
    out: dict[str, dict] = {}
    for fact in nodes.planner.facts.facts if nodes.planner.facts else ():
        value = json.loads(fact.value_json)
        if fact.kind == "skill_success_rate" and fact.status == "active" and \
                fact.key.endswith(f" + {ENVIRONMENT}"):
            entry = out.setdefault(fact.key.split(" + ")[1], {})
            entry.update(success_rate=round(fact.success_rate, 3),
                         n_observations=fact.n_observations,
                         recommended_force_n=next((kv.value for kv in fact.recommended_parameters
                                                   if kv.key == "force_n"), None))
        elif fact.kind == "object_property" and value.get("property") == "mass_kg":
            out.setdefault(value["target_class"], {})["mass_kg_median"] = \
                value["band"]["median"]
    return dict(sorted(out.items()))


def learn_known_objects(workdir: Path, seed: int, count: int, block: int, log,
                        timings: dict) -> LearnedMemory:
    """The memory loop of run_sim over the first `count` episodes of its stream (the
    closed loop's objects); the stack is stopped, then its store copied."""
    manifest = workdir / "manifest.yaml"
    shutil.copy(EXAMPLE_MANIFEST, manifest)
    hash_file = workdir / "certified_hash"
    hash_file.write_text(load_manifest(manifest).identity_hash() + "\n")
    started = time.monotonic()
    stack = start_stack(workdir / "learning.db", manifest, hash_file, log)
    nodes = Nodes(use_memory=True)
    try:
        wait_ready(nodes, 0)
        client = consolidate_client(nodes)
        stream = episodes(seed, count)
        for start in range(0, len(stream), block):
            for episode in stream[start:start + block]:
                run_episode(nodes.planner, nodes.skill, episode)
            consolidate(nodes, client, nodes.skill.published)
        facts = _facts_summary(nodes)
        end_sim_s = nodes.sim.now_ns() / 1e9
    finally:
        nodes.close()
        stack.stop()
    learned = workdir / "learned.db"
    copy_store(workdir / "learning.db", learned)
    timings["learning_s"] = round(time.monotonic() - started, 1)
    return LearnedMemory(learned, manifest, hash_file, end_sim_s, nodes.skill.published,
                         count, facts)


def run_held_out(nodes: Nodes, client, stream: list[Episode], block: int, base: int
                 ) -> list[TransferStep]:
    """Each object's episodes in blocks; after each block, a pass that covers it
    (`base`: the attempts the store already covered)."""
    steps = []
    for start in range(0, len(stream), block):
        for episode in stream[start:start + block]:
            mass = nodes.sim.weigh(episode.target, episode.episode_seed) \
                if nodes.planner.allow_analogies else 0.0
            answer, decision = nodes.planner.answer_and_plan(
                episode, {"mass_kg": mass} if mass else None)
            success, reason = False, ""
            if decision.action != SKIP:
                outcome = nodes.skill.execute(episode.target, decision.force_n,
                                              episode.episode_seed,
                                              intent_id=f"sim-{episode.number}")
                success, reason = outcome.success, outcome.failure_reason
            steps.append(TransferStep(
                episode.number, episode.target, answer.status, answer.reason_code,
                decision.lent_from,
                round(answer.analogies[0].distance, 4) if answer.analogies else None,
                mass, decision.action, decision.force_n, success, reason, decision.why))
        consolidate(nodes, client, base + nodes.skill.published)
    return steps


def segments_of(stream: list[Episode]) -> list[list[Episode]]:
    """The stream cut where the object changes."""
    out: list[list[Episode]] = []
    for episode in stream:
        if out and out[-1][-1].target == episode.target:
            out[-1].append(episode)
        else:
            out.append([episode])
    return out


def run_arm(ctx: Context, name: str, groups: list[list[list[Episode]]],
            allow_analogies: bool) -> list[TransferStep]:
    """Run groups of segments, each group on its own copy of the learned store (one
    stack per group), the segments of a group one after another."""
    learned = ctx.learned
    steps: list[TransferStep] = []
    for index, group in enumerate(groups):
        started = time.monotonic()
        db = ctx.workdir / f"{name}_{index}.db"
        copy_store(learned.db_path, db)
        stack = start_stack(db, learned.manifest, learned.certified_hash_file, ctx.log)
        # The clock goes on from where the learned robot stopped: its new results are
        # newer than everything it learned.
        nodes = Nodes(use_memory=True, allow_analogies=allow_analogies,
                      sim_start_s=learned.end_sim_s + 10.0)
        try:
            wait_ready(nodes, learned.observations)
            client = consolidate_client(nodes)
            for segment in group:
                steps += run_held_out(nodes, client, segment, ctx.block, learned.observations)
        finally:
            nodes.close()
            stack.stop()
        ctx.timings[f"{name}_{index}_s"] = round(time.monotonic() - started, 1)
    return steps


def experiment_analogies(ctx: Context) -> list[PairedRun]:
    """Experiment (a) and its misleading case: held-out objects with and without
    analogies. Without analogies no object's answer depends on another's facts, so that
    arm runs every segment on one copy; with them, each segment gets its own copy."""
    segments = [(t, ctx.similar_episodes) for t in SIMILAR] + \
        [(MISLEADING, ctx.misleading_episodes)]
    stream = held_out_episodes(ctx.seed + HELD_OUT_SEED_OFFSET, segments,
                               first_number=ctx.learned.episodes)
    parts = segments_of(stream)
    without = run_arm(ctx, "analogies_without", [parts], allow_analogies=False)
    with_ = run_arm(ctx, "analogies_with", [[part] for part in parts], allow_analogies=True)
    similar = [i for i, e in enumerate(stream) if e.target != MISLEADING]
    misleading = [i for i, e in enumerate(stream) if e.target == MISLEADING]

    def pick(indices, steps):
        return [steps[i] for i in indices]

    labels = ("planner without analogies (explores until its own facts answer)",
              "planner with analogies (explores with the nearest known object's force)")
    return [
        PairedRun("analogies", "After the known objects are learned, held-out objects whose "
                  "physics resembles a known one appear: do analogies save attempts?",
                  *labels, pick(similar, stream), pick(similar, without),
                  pick(similar, with_)),
        PairedRun("analogies", f"{MISLEADING} weighs what glass_cup weighs but cracks at "
                  "glass_cup's force: how much does the analogy cost, and how fast does "
                  "the robot's own evidence take over?", *labels,
                  pick(misleading, stream), pick(misleading, without),
                  pick(misleading, with_), notes={"misleading": True}),
    ]


# The experiments `make sim` runs; each returns [the experiment, its misleading case].
EXPERIMENTS: list[Callable[[Context], list[PairedRun]]] = [experiment_analogies]


def paired_effect(without: list[TransferStep], with_: list[TransferStep]) -> dict:
    """run_sim's reduction with its paired BCa CI, plus the paired mean difference of
    unproductive attempts per episode (with its own BCa CI), which stays defined when
    one arm has no unproductive attempt at all. A CI scipy cannot compute (every
    resample equal, or a resample with no unproductive attempt without the feature) is
    null, with the reason."""
    effect = reduction_with_ci(without, with_)
    if not all(math.isfinite(v) for v in effect["ci95"]):
        effect["ci95"] = None
        effect["ci_note"] = "BCa undefined for these counts (degenerate resamples)"
    if not math.isfinite(effect["reduction"]):
        effect["reduction"] = None
    a = np.array([s.unproductive for s in without], dtype=float)
    b = np.array([s.unproductive for s in with_], dtype=float)
    difference = {"mean": float(np.mean(a - b)), "ci95": None}
    if np.ptp(a - b) > 0:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ci = bootstrap((a - b,), np.mean, vectorized=True, **BOOTSTRAP).confidence_interval
        if math.isfinite(ci.low) and math.isfinite(ci.high):
            difference["ci95"] = [float(ci.low), float(ci.high)]
    effect["saved_per_episode"] = difference
    return effect


def _first(steps: list[TransferStep], predicate) -> int | None:
    """1-based position of the first step that satisfies `predicate`, or None."""
    return next((i + 1 for i, s in enumerate(steps) if predicate(s)), None)


def target_summary(steps: list[TransferStep]) -> dict:
    return {"episodes": len(steps), "attempts": sum(s.attempted for s in steps),
            "successes": sum(s.success for s in steps),
            "unproductive": sum(s.unproductive for s in steps),
            "skipped": sum(not s.attempted for s in steps),
            "answers": {status: sum(s.status == status for s in steps)
                        for status in sorted({s.status for s in steps})},
            "borrowed_attempts": sum(s.action == BORROW for s in steps),
            "borrowed_unproductive": sum(s.action == BORROW and s.unproductive for s in steps),
            "borrowed_forces_n": sorted({s.force_n for s in steps if s.action == BORROW}),
            "lent_from": sorted({s.lent_from for s in steps if s.lent_from}),
            "episode_of_first_success": _first(steps, lambda s: s.success),
            "episode_own_fact_first_served": _first(steps, lambda s: s.status == "OK"),
            "analogy_after_own_fact": any(
                s.status == ANALOGY for s in steps[(_first(steps, lambda s: s.status == "OK")
                                                    or len(steps) + 1) - 1:])}


def report_run(run: PairedRun) -> dict:
    """The JSON block of one paired run: the effect with its CI, per object, the steps."""
    targets = sorted({e.target for e in run.stream}, key=[e.target for e in run.stream].index)
    per_target = {t: {"without": target_summary([s for s in run.without if s.target == t]),
                      "with": target_summary([s for s in run.with_ if s.target == t])}
                  for t in targets}
    return {"question": run.question, "without": run.without_label, "with": run.with_label,
            "objects": {t: asdict(HELD_OUT[t]) for t in targets},
            "episodes": len(run.stream),
            "effect": paired_effect(run.without, run.with_),
            "analogy_answers_with": sum(s.status == ANALOGY for s in run.with_),
            "successes_without": sum(s.success for s in run.without),
            "successes_with": sum(s.success for s in run.with_),
            "per_object": per_target,
            "steps_without": [asdict(s) for s in run.without],
            "steps_with": [asdict(s) for s in run.with_]}


def plot(runs: list[PairedRun], path: Path) -> None:
    """One panel per paired run: cumulative unproductive attempts over its episodes."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(4.6 * len(runs), 3.6), squeeze=False)
    for ax, run in zip(axes[0], runs):
        x = range(1, len(run.stream) + 1)
        for steps, label, style in ((run.without, "without", "o--"), (run.with_, "with", "s-")):
            ax.plot(x, np.cumsum([s.unproductive for s in steps]), style, markersize=3,
                    label=f"{label} {run.key}")
        for boundary in [i for i in range(1, len(run.stream))
                         if run.stream[i].target != run.stream[i - 1].target]:
            ax.axvline(boundary + 0.5, color="grey", linewidth=0.6)
        own = [i + 1 for i, s in enumerate(run.with_) if s.status == "OK" and
               (i == 0 or run.with_[i - 1].status != "OK" or
                run.with_[i - 1].target != s.target)]
        for i, x_own in enumerate(own):
            ax.axvline(x_own, color="tab:orange", linestyle=":", linewidth=1,
                       label="own fact served (with)" if i == 0 else None)
        title = ("misleading: " if run.notes.get("misleading") else "") + \
            ", ".join(dict.fromkeys(e.target for e in run.stream))
        ax.set(xlabel="held-out episode", ylabel="unproductive attempts (cumulative)",
               title=f"{run.key}: {title}")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_transfer(seed: int = DEFAULT_SEED, learn: int = 40, learn_block: int = 20,
                 similar_episodes: int = 12, misleading_episodes: int = 16, block: int = 4,
                 out_dir: str | Path = ".", keep: bool = False,
                 experiments=None) -> dict:
    started = time.monotonic()
    timings: dict[str, float] = {}
    workdir = Path(tempfile.mkdtemp(prefix="robot_memory_transfer_"))
    log = open(workdir / "nodes.log", "wb")
    rclpy.init()
    try:
        learned = learn_known_objects(workdir, seed, learn, learn_block, log, timings)
        ctx = Context(learned, seed, block, workdir, log, timings,
                      similar_episodes, misleading_episodes)
        runs = [run for experiment in (experiments or EXPERIMENTS) for run in experiment(ctx)]
    except (TimeoutError, RuntimeError):
        log.flush()
        _say("[transfer] FAILED; last lines of the nodes' log:\n" + "\n".join(
            (workdir / "nodes.log").read_text(errors="replace").splitlines()[-30:]))
        raise
    finally:
        rclpy.try_shutdown()
        log.close()
    result = {"command": "make sim", "seed": seed, "held_out_seed": seed + HELD_OUT_SEED_OFFSET,
              "block": block, "consolidation": "a pass requested at the end of each block",
              "learning": {"episodes": learn, "block": learn_block,
                           "objects": sorted(OBJECTS), "facts": learned.facts},
              "unproductive": "failed attempts (slipped or cracked) on the held-out objects",
              "experiments": {}, "misleading": {}}
    for run in runs:
        part = "misleading" if run.notes.get("misleading") else "experiments"
        result[part][run.key] = report_run(run)
    result["runtime_s"] = round(time.monotonic() - started, 1)
    result["timings_s"] = timings
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sim_transfer.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(runs, out / "sim_transfer.png")
    if not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    report(result, out)
    return result


def _ci(ci) -> str:
    return f"95% CI {ci[0]:.1%} to {ci[1]:.1%}" if ci else "CI undefined"


def report(result: dict, out: Path) -> None:
    facts = ", ".join(f"{t}: {f.get('recommended_force_n')} N, {f.get('mass_kg_median')} kg"
                      for t, f in result["learning"]["facts"].items())
    _say(f"[transfer] learned from {result['learning']['episodes']} episodes ({facts})")
    for part in ("experiments", "misleading"):
        for key, block in result[part].items():
            effect = block["effect"]
            reduction = effect["reduction"]
            _say(f"[transfer] {part}/{key}: {block['episodes']} episodes; unproductive "
                 f"attempts {effect['unproductive_without']} without, "
                 f"{effect['unproductive_with']} with: reduction "
                 f"{'n/a' if reduction is None else f'{reduction:.1%}'} "
                 f"({_ci(effect['ci95'])}); {block['analogy_answers_with']} ANALOGY answers")
            for target, arms in block["per_object"].items():
                w, o = arms["with"], arms["without"]
                _say(f"    {target:>14}: unproductive {o['unproductive']} -> "
                     f"{w['unproductive']} ({w['borrowed_unproductive']} of "
                     f"{w['borrowed_attempts']} borrowed attempts failed); first success at "
                     f"episode {o['episode_of_first_success']} -> "
                     f"{w['episode_of_first_success']}; own fact served from episode "
                     f"{w['episode_own_fact_first_served']}")
    _say(f"[transfer] wrote {out / 'sim_transfer.json'} and {out / 'sim_transfer.png'} in "
         f"{result['runtime_s']} s ({result['timings_s']})")

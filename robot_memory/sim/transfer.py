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
  explores with that object's recommended force (policy.borrow). While its first
  attempts are consolidated but too few to be served, `ground` still answers ANALOGY
  (reason only_candidates); the planner keeps the lent force should it answer ABSTAIN
  only_candidates instead (no known object close enough any more). Without analogies
  it explores with the episode's force until its own facts answer. With them, each
  object's segment runs on a fresh copy of the learned store, so one held-out object is
  never lent to another.
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
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

import rclpy

from robot_memory.manifest import load_manifest
from robot_memory.sim.grasp_skill import ENVIRONMENT
from robot_memory.sim.episodes import Episode, episodes, held_out_episodes
from robot_memory.sim.run_sim import DEFAULT_SEED, EXAMPLE_MANIFEST, Nodes, _say, run_episode
from robot_memory.sim.scene import OBJECTS
from robot_memory.sim.transfer_priors import JOINER_SEED_OFFSET, experiment_priors
from robot_memory.sim.transfer_report import plot, report, report_run
from robot_memory.sim.transfer_runs import (consolidate, consolidate_client, copy_store,
                                            run_held_out, segments_of, start_stack,
                                            wait_ready)
from robot_memory.sim.transfer_steps import Context, LearnedMemory, PairedRun, TransferStep

SIMILAR = ("glass_jar", "tea_glass", "stoneware_mug")  # each resembles a known object
MISLEADING = "crystal_glass"  # weighs what glass_cup weighs; glass_cup's force cracks it
HELD_OUT_SEED_OFFSET = 1  # the held-out stream's seed: the run's seed + this


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
EXPERIMENTS: list[Callable[[Context], list[PairedRun]]] = [
    experiment_analogies, experiment_priors]


def run_transfer(seed: int = DEFAULT_SEED, learn: int = 40, learn_block: int = 20,
                 similar_episodes: int = 12, misleading_episodes: int = 16, block: int = 4,
                 out_dir: str | Path = ".", keep: bool = False,
                 experiments=None, joiner_episodes: int = 24) -> dict:
    started = time.monotonic()
    timings: dict[str, float] = {}
    workdir = Path(tempfile.mkdtemp(prefix="robot_memory_transfer_"))
    log = open(workdir / "nodes.log", "wb")
    rclpy.init()
    try:
        learned = learn_known_objects(workdir, seed, learn, learn_block, log, timings)
        ctx = Context(learned, seed, block, workdir, log, timings,
                      similar_episodes, misleading_episodes, joiner_episodes)
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
              "second_robot_seed": seed + JOINER_SEED_OFFSET,
              "block": block, "consolidation": "a pass requested at the end of each block",
              "learning": {"episodes": learn, "block": learn_block,
                           "objects": sorted(OBJECTS), "facts": learned.facts},
              "unproductive": "failed attempts (slipped or cracked) of the compared stream",
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

"""Transfer experiment (b): a second robot of the same embodiment joins after the first
has learned. Does starting from the first robot's facts (fleet priors) save attempts?

The second robot has its own manifest (another agent_id, the same embodiment), so its
own identity, and an empty store. Its grounding server reads the first robot's memory
as an evidence bundle (`priors_sources`), verified before use (docs/priors.md). Both
arms run the same stream of the closed loop's objects from an empty store: with
`allow_priors` the planner explores with the force the sibling's fact recommends while
`ground` answers PRIOR, and from the pass that makes its own fact servable it answers
from its own facts, as the arm without priors does.

The misleading case: the second robot's site stocks, under the class name glass_cup, a
glass that behaves like crystal_glass (it grips better and cracks at 18 N). The first
robot's glass_cup force cracks it: the prior misleads until the robot's own evidence is
served.
"""

from __future__ import annotations

from pathlib import Path

from robot_memory.evidence.bundle import export_bundle
from robot_memory.manifest import load_manifest
from robot_memory.sim.episodes import episodes, held_out_episodes
from robot_memory.sim.run_sim import Nodes
from robot_memory.sim.transfer_runs import (consolidate_client, run_held_out, start_stack,
                                            wait_ready)
from robot_memory.sim.transfer_steps import Context, PairedRun, TransferStep
from robot_memory.store import MemoryStore

SECOND_AGENT = "demo-arm-02"
JOINER_SEED_OFFSET = 2  # the second robot's stream: the run's seed + this
LOOK_ALIKE = {"glass_cup": "crystal_glass"}  # at the second robot's site


def first_robot_bundle(ctx: Context) -> Path:
    """The first robot's memory as an evidence bundle, with its manifest."""
    learned = ctx.learned
    identity = load_manifest(learned.manifest).identity_hash()
    out = ctx.workdir / "first_robot.bundle"
    store = MemoryStore(f"sqlite:///{learned.db_path}")
    try:
        export_bundle(store.partition(identity), out, manifest_path=learned.manifest)
    finally:
        store.close()
    return out


def second_robot(ctx: Context) -> tuple[Path, Path]:
    """The second robot's manifest (the first's, with another agent_id) and its
    certified hash file."""
    manifest = ctx.workdir / "second_robot.yaml"
    text = ctx.learned.manifest.read_text()
    first_agent = load_manifest(ctx.learned.manifest).agent_id
    manifest.write_text(text.replace(f"agent_id: {first_agent}", f"agent_id: {SECOND_AGENT}"))
    hash_file = ctx.workdir / "second_robot.certified_hash"
    hash_file.write_text(load_manifest(manifest).identity_hash() + "\n")
    return manifest, hash_file


def run_second_robot(ctx: Context, name: str, stream, allow_priors: bool, bundle: Path,
                     physics_of: dict[str, str] | None = None) -> list[TransferStep]:
    """The stream on a fresh store of the second robot (priors from `bundle` only in the
    arm that asks for them: the other arm's server has no source)."""
    manifest, hash_file = second_robot(ctx)
    sources = {"priors_sources": [str(bundle)]} if allow_priors else {}
    stack = start_stack(ctx.workdir / f"{name}.db", manifest, hash_file, ctx.log, **sources)
    nodes = Nodes(use_memory=True, allow_priors=allow_priors, physics_of=physics_of,
                  sim_start_s=ctx.learned.end_sim_s + 10.0)
    try:
        wait_ready(nodes, 0)
        return run_held_out(nodes, consolidate_client(nodes), stream, ctx.block, 0)
    finally:
        nodes.close()
        stack.stop()


def experiment_priors(ctx: Context) -> list[PairedRun]:
    """Experiment (b) and its misleading case."""
    bundle = first_robot_bundle(ctx)
    labels = ("second robot without fleet priors (explores until its own facts answer)",
              "second robot with the first robot's facts as priors (explores with the "
              "sibling's recommended force while the answer is PRIOR)")
    joins = episodes(ctx.seed + JOINER_SEED_OFFSET, ctx.joiner_episodes)
    look_alike = held_out_episodes(ctx.seed + JOINER_SEED_OFFSET,
                                   [("glass_cup", ctx.misleading_episodes)])
    runs = []
    for stream, physics_of, question, notes in (
            (joins, None, "A second robot of the same embodiment joins after the first has "
             "learned: do the first robot's facts, served as priors, save attempts?", {}),
            (look_alike, LOOK_ALIKE, "At the second robot's site, glass_cup is a glass that "
             "cracks at the first robot's glass_cup force: how much does the prior cost, and "
             "how fast does the robot's own evidence take over?",
             {"misleading": True, "physics_of": LOOK_ALIKE})):
        tag = "misleading_" if physics_of else ""
        without = run_second_robot(ctx, f"priors_{tag}without", stream, False, bundle,
                                   physics_of)
        with_ = run_second_robot(ctx, f"priors_{tag}with", stream, True, bundle, physics_of)
        runs.append(PairedRun("priors", question, *labels, stream, without, with_, notes))
    return runs

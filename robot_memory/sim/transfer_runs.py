"""What every transfer experiment does with a robot: start its stack (passes only on
request), wait until it is ready, request the passes that cover its attempts, copy its
store, and run a stream of episodes in blocks (robot_memory/sim/transfer.py)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from robot_memory.operation.bringup import Stack
from robot_memory.operation.operator_credentials import key_line
from robot_memory.ros.credentials import sign_message
from robot_memory.sim.episodes import Episode
from robot_memory.sim.policy import SKIP
from robot_memory.sim.run_sim import Nodes, _wait, wait_stack_ready
from robot_memory.sim.transfer_steps import TransferStep
from robot_memory.srv import Consolidate


# Passes only when requested: no timer pass within a run, none for a backlog.
ON_REQUEST = {"period_s": 86400.0, "pass_after_new_events": 0}
# The operator who requests them: a key made for this run, the only one its stacks accept
# (applying a pass over the `consolidate` service needs an operator's credential).
OPERATOR_KEY = Ed25519PrivateKey.generate()
OPERATOR_KEYS = [key_line("sim_operator", OPERATOR_KEY.public_key())]


def start_stack(db_path: Path, manifest: Path, certified_hash_file: Path, log,
                **settings) -> Stack:
    """The four nodes on this store and manifest, on sim time (`settings`: more node
    parameters, e.g. priors_sources)."""
    return Stack({"database_url": f"sqlite:///{db_path}", "manifest_path": str(manifest),
                  "certified_hash_file": str(certified_hash_file), **ON_REQUEST,
                  "operator_keys": OPERATOR_KEYS, **settings},
                 use_sim_time=True).start(stdout=log, stderr=log)


def consolidate(nodes: Nodes, client, covered: int, timeout_s: float = 60.0) -> None:
    """Request passes until the facts cover `covered` attempts (the logger may not have
    stored the last results when a pass starts: then the next pass takes them)."""
    deadline = time.monotonic() + timeout_s
    while nodes.planner.observations_in_memory() < covered:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no pass covered {covered} attempts in {timeout_s} s")
        future = client.call_async(sign_message(OPERATOR_KEY, client.service_name,
                                                Consolidate.Request(dry_run=False)))
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
    wait_stack_ready(nodes)
    _wait(lambda: nodes.planner.observations_in_memory() >= observations, 60,
          f"the facts covering the {observations} learned attempts")


def copy_store(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite store (the backup API: the log's pages included)."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


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

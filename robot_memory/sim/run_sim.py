"""`make sim` / `robot-memory demo --sim`: the closed loop in a physics simulator.

The same episode stream (objects, physical jitter, exploratory forces; one seed) is run
twice through the simulator, grasp skill and planner nodes:
- without memory: the planner explores every time (nothing is stored);
- with memory: robot_memory's four nodes run with use_sim_time on the simulator's
  /clock, the skill's results are logged and consolidated, and the planner asks
  `ground` before every attempt.
Per block of episodes it prints attempts, successes, success rate and unproductive
attempts (failed attempts) for both runs, the reduction with a paired BCa bootstrap CI,
and writes sim_closed_loop.json and sim_closed_loop.png.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import rclpy
from lifecycle_msgs.msg import State
from lifecycle_msgs.srv import GetState
from rclpy.executors import MultiThreadedExecutor
from scipy.stats import bootstrap

from robot_memory.operation.bringup import Stack
from robot_memory.manifest import load_manifest
from robot_memory.msg import IdentityStatus
from robot_memory.ros.matching import wait_for_subscriber
from robot_memory.ros.qos import IDENTITY_STATUS_QOS
from robot_memory.sim.episodes import Episode, episodes
from robot_memory.sim.grasp_skill import GraspSkillNode
from robot_memory.sim.planner import PlannerNode
from robot_memory.sim.policy import SKIP
from robot_memory.sim.sim_node import SIM_START_S, SimNode

EXAMPLE_MANIFEST = Path(__file__).resolve().parent.parent / "config" / "example_manifest.yaml"
DEFAULT_SEED = 20260524
BOOTSTRAP = {"n_resamples": 2000, "method": "BCa", "random_state": 20260524}


class Attempted:
    """What an episode's record says of its attempt (its `action` and `success`)."""

    @property
    def attempted(self) -> bool:
        return self.action != SKIP

    @property
    def unproductive(self) -> bool:
        return self.attempted and not self.success


@dataclass(frozen=True)
class Step(Attempted):
    episode: int
    target: str
    action: str
    force_n: float
    success: bool
    failure_reason: str
    why: str


def _say(text: str) -> None:
    print(text, flush=True)


def _wait(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


def run_episode(planner: PlannerNode, skill: GraspSkillNode, episode: Episode) -> Step:
    decision = planner.plan(episode)
    if decision.action == SKIP:
        return Step(episode.number, episode.target, SKIP, 0.0, False, "", decision.why)
    outcome = skill.execute(episode.target, decision.force_n, episode.episode_seed,
                            intent_id=f"sim-{episode.number}")
    return Step(episode.number, episode.target, decision.action, decision.force_n,
                outcome.success, outcome.failure_reason, decision.why)


class Nodes:
    """The simulator, skill and planner nodes of one run, spun in a background thread."""

    def __init__(self, use_memory: bool, allow_analogies: bool = False,
                 sim_start_s: float = SIM_START_S, allow_priors: bool = False,
                 physics_of: dict[str, str] | None = None):
        self.sim = SimNode(start_s=sim_start_s, physics_of=physics_of)
        self.skill = GraspSkillNode(self.sim, publish=use_memory)
        self.planner = PlannerNode(use_memory, allow_analogies=allow_analogies,
                                   allow_priors=allow_priors)
        self.identity: IdentityStatus | None = None
        self.planner.create_subscription(IdentityStatus, "identity_status",
                                         lambda msg: setattr(self, "identity", msg),
                                         IDENTITY_STATUS_QOS)
        self.executor = MultiThreadedExecutor(num_threads=3)
        for node in (self.sim, self.skill, self.planner):
            self.executor.add_node(node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def close(self) -> None:
        # Take the nodes out of the executor first: a callback still queued for a node
        # being destroyed would otherwise end as an unretrieved InvalidHandle.
        for node in (self.planner, self.skill, self.sim):
            self.executor.remove_node(node)
        self.executor.shutdown()
        self.thread.join(timeout=5)
        for node in (self.sim, self.skill, self.planner):
            node.destroy_node()


def wait_stack_ready(nodes: Nodes) -> None:
    """Identity verified, `ground` answering and the logger subscribed to the skill."""
    _wait(lambda: nodes.identity is not None, 60, "manifest_verifier's identity_status")
    if nodes.identity.state != IdentityStatus.VERIFIED:
        raise RuntimeError(f"identity not verified: {nodes.identity.reason}")
    _wait(lambda: nodes.planner.grounding.wait_for_service(0.1), 60, "the 'ground' service")
    _wait(lambda: nodes.planner.grounding.query("manipulation.grasp").status
          != "IDENTITY_UNVERIFIED", 60, "the memory nodes to activate")
    if not wait_for_subscriber(nodes.skill.results, 60):
        raise TimeoutError("episodic_logger did not subscribe to execution_results")
    # The verifier activates the managed nodes one by one: `ground` answering says the
    # grounding server is active, not yet the consolidator whose passes a run requests.
    wait_active(nodes.planner, "consolidator", 60)


def wait_active(node, managed: str, timeout_s: float) -> None:
    """Until `managed` says it is active, asked through its get_state service (one
    client for the whole wait; an unanswered request is asked again)."""
    client = node.create_client(GetState, f"{managed}/get_state")

    def active() -> bool:
        if not client.wait_for_service(0.5):
            return False
        future = client.call_async(GetState.Request())
        deadline = time.monotonic() + 2.0
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        return future.done() and \
            future.result().current_state.id == State.PRIMARY_STATE_ACTIVE
    try:
        _wait(active, timeout_s, f"{managed} to activate")
    finally:
        node.destroy_client(client)


def run_without_memory(stream: list[Episode]) -> list[Step]:
    nodes = Nodes(use_memory=False)
    try:
        return [run_episode(nodes.planner, nodes.skill, episode) for episode in stream]
    finally:
        nodes.close()


def run_with_memory(stream: list[Episode], block: int, workdir: Path, period_s: float,
                    log, timings: dict) -> list[Step]:
    manifest = workdir / "manifest.yaml"
    shutil.copy(EXAMPLE_MANIFEST, manifest)
    (workdir / "certified_hash").write_text(load_manifest(manifest).identity_hash() + "\n")
    stack = Stack({"database_url": f"sqlite:///{workdir / 'memory.db'}",
                   "manifest_path": str(manifest),
                   "certified_hash_file": str(workdir / "certified_hash"), "period_s": period_s},
                  use_sim_time=True).start(stdout=log, stderr=log)
    nodes = Nodes(use_memory=True)
    started = time.monotonic()
    try:
        wait_stack_ready(nodes)
        timings["stack_ready_s"] = round(time.monotonic() - started, 1)
        steps = []
        for start in range(0, len(stream), block):
            steps += [run_episode(nodes.planner, nodes.skill, episode)
                      for episode in stream[start:start + block]]
            # Between blocks the robot waits for the consolidator's next pass.
            _wait(lambda: nodes.planner.observations_in_memory() >= nodes.skill.published, 60,
                  f"the consolidator to cover {nodes.skill.published} attempts")
        return steps
    finally:
        nodes.close()
        stack.stop()


def block_stats(steps: list[Step], block: int) -> list[dict]:
    out = []
    for start in range(0, len(steps), block):
        part = steps[start:start + block]
        attempts = sum(s.attempted for s in part)
        successes = sum(s.success for s in part)
        out.append({"episodes": f"{start + 1}-{start + len(part)}", "attempts": attempts,
                    "successes": successes, "skipped": len(part) - attempts,
                    "success_rate": successes / attempts if attempts else 0.0,
                    "unproductive": sum(s.unproductive for s in part)})
    return out


def reduction_with_ci(without: list[Step], with_memory: list[Step]) -> dict:
    """1 - unproductive(with) / unproductive(without), and its paired BCa bootstrap CI
    over episodes (each episode is the same in both runs)."""
    a = np.array([s.unproductive for s in without], dtype=float)
    b = np.array([s.unproductive for s in with_memory], dtype=float)

    def statistic(x, y, axis=-1):
        return 1.0 - y.sum(axis=axis) / x.sum(axis=axis)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ci = bootstrap((a, b), statistic, paired=True, vectorized=True,
                       **BOOTSTRAP).confidence_interval
    return {"unproductive_without": int(a.sum()), "unproductive_with": int(b.sum()),
            "reduction": float(statistic(a, b)), "ci95": [float(ci.low), float(ci.high)],
            "ci_method": "paired BCa bootstrap over episodes, 2000 resamples"}


def plot(without: list[dict], with_memory: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = range(1, len(without) + 1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    for stats, label, style in ((without, "without memory", "o--"),
                                (with_memory, "with robot_memory", "s-")):
        left.plot(x, [b["unproductive"] for b in stats], style, label=label)
        right.plot(x, [b["success_rate"] for b in stats], style, label=label)
    left.set(xlabel="block of episodes", ylabel="unproductive attempts",
             title="Unproductive attempts per block")
    right.set(xlabel="block of episodes", ylabel="success rate of attempts", ylim=(0, 1.05),
              title="Success rate per block")
    left.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_sim(decisions: int = 120, block: int = 20, seed: int = DEFAULT_SEED,
            period_s: float = 1.0, out_dir: str | Path = ".", keep: bool = False) -> dict:
    started = time.monotonic()
    stream = episodes(seed, decisions)
    timings: dict[str, float] = {}
    workdir = Path(tempfile.mkdtemp(prefix="robot_memory_sim_"))
    log = open(workdir / "nodes.log", "wb")
    rclpy.init()
    try:
        without = run_without_memory(stream)
        timings["without_memory_s"] = round(time.monotonic() - started, 1)
        with_memory = run_with_memory(stream, block, workdir, period_s, log, timings)
        timings["with_memory_s"] = round(time.monotonic() - started
                                         - timings["without_memory_s"], 1)
    except (TimeoutError, RuntimeError):
        log.flush()
        _say("[sim] FAILED; last lines of the nodes' log:\n" + "\n".join(
            (workdir / "nodes.log").read_text(errors="replace").splitlines()[-30:]))
        raise
    finally:
        rclpy.try_shutdown()
        log.close()
    stats_without, stats_with = block_stats(without, block), block_stats(with_memory, block)
    result = {"command": "make sim", "seed": seed, "episodes": decisions, "block": block,
              "consolidation_period_sim_s": period_s,
              "blocks_without_memory": stats_without, "blocks_with_memory": stats_with,
              "effect": reduction_with_ci(without, with_memory),
              "successes_without": sum(s.success for s in without),
              "successes_with": sum(s.success for s in with_memory),
              "steps_with_memory": [asdict(s) for s in with_memory],
              "runtime_s": round(time.monotonic() - started, 1), "timings_s": timings}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sim_closed_loop.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(stats_without, stats_with, out / "sim_closed_loop.png")
    if not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    report(result, out)
    return result


def report(result: dict, out: Path) -> None:
    _say(f"[sim] {result['episodes']} episodes (seed {result['seed']}), blocks of "
         f"{result['block']}; unproductive = failed attempts (slipped or cracked)")
    _say(f"{'block':>9} | {'without memory: att  succ  rate  unprod':>38} | "
         f"{'with memory: att  succ  rate  unprod  skipped':>45}")
    for a, b in zip(result["blocks_without_memory"], result["blocks_with_memory"]):
        _say(f"{a['episodes']:>9} | {a['attempts']:>20} {a['successes']:>5} "
             f"{a['success_rate']:>5.2f} {a['unproductive']:>7} | {b['attempts']:>17} "
             f"{b['successes']:>5} {b['success_rate']:>5.2f} {b['unproductive']:>7} "
             f"{b['skipped']:>8}")
    effect = result["effect"]
    _say(f"[sim] unproductive attempts: {effect['unproductive_without']} without memory, "
         f"{effect['unproductive_with']} with memory: reduction {effect['reduction']:.1%} "
         f"(95% CI {effect['ci95'][0]:.1%} to {effect['ci95'][1]:.1%}, "
         f"{effect['ci_method']})")
    _say(f"[sim] successful grasps: {result['successes_without']} without memory, "
         f"{result['successes_with']} with memory")
    _say(f"[sim] wrote {out / 'sim_closed_loop.json'} and {out / 'sim_closed_loop.png'} "
         f"in {result['runtime_s']} s ({result['timings_s']})")

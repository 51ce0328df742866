"""`robot-memory demo`: the stack, a simulated grasp skill and a planner, in sim time.

1. start the four nodes with use_sim_time (same parameters as the launch file) and a
   /clock publisher standing in for Gazebo;
2. the planner asks for grounding before any experience: robot_memory abstains;
3. the skill publishes the paper's 16 grasp results, stamped in sim time;
4. after the consolidator's next pass the planner asks again: 25 N recommended;
5. the identity hash, recomputed from the manifest before and after, is byte-equal.
Exits 0 only if every step did what it should.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path

import rclpy
from rclpy.clock import Clock, ClockType
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock as ClockMsg

from robot_memory.operation.bringup import Stack
from robot_memory.ros.client import GroundingClient, format_grounding_block
from robot_memory.demo.scenario import (ATTEMPT_SECONDS, ENVIRONMENT, SKILL, TARGET,
                                        glass_cup_attempts)
from robot_memory.manifest import load_manifest
from robot_memory.msg import ExecutionResult, IdentityStatus, KeyValue, SemanticFactArray
from robot_memory.ros.matching import wait_for_subscriber
from robot_memory.ros.qos import EXECUTION_RESULTS_QOS, FACTS_QOS, IDENTITY_STATUS_QOS

EXAMPLE_MANIFEST = Path(__file__).resolve().parent.parent / "config" / "example_manifest.yaml"
SIM_START_S = 1000.0
SIM_RATE = 5.0  # sim seconds per wall second
LOG_TAIL_LINES = 40  # of the nodes' log, printed when the demo fails


class SimClock(Node):
    """Publishes /clock like Gazebo does, SIM_RATE times faster than the wall clock."""

    def __init__(self):
        super().__init__("demo_sim_clock")
        self._publisher = self.create_publisher(ClockMsg, "/clock", 10)
        self._start = time.monotonic()
        self.create_timer(0.01, self._tick, clock=Clock(clock_type=ClockType.STEADY_TIME))

    def _tick(self):
        sim = SIM_START_S + (time.monotonic() - self._start) * SIM_RATE
        msg = ClockMsg()
        msg.clock.sec, msg.clock.nanosec = int(sim), int((sim % 1) * 1e9)
        self._publisher.publish(msg)


class DemoPlanner(Node):
    """Plays both the grasp skill (publisher) and the planner (grounding client)."""

    def __init__(self):
        super().__init__("demo_planner",
                         parameter_overrides=[Parameter("use_sim_time", value=True)])
        self.results = self.create_publisher(ExecutionResult, "execution_results",
                                             EXECUTION_RESULTS_QOS)
        self.grounding = GroundingClient(self, timeout_s=5.0)
        self.identity: IdentityStatus | None = None
        self.facts: SemanticFactArray | None = None
        self.create_subscription(IdentityStatus, "identity_status", self._on_identity,
                                 IDENTITY_STATUS_QOS)
        self.create_subscription(SemanticFactArray, "facts", self._on_facts, FACTS_QOS)

    def _on_identity(self, msg):
        self.identity = msg

    def _on_facts(self, msg):
        self.facts = msg

    def publish_attempts(self) -> int:
        results = attempt_results(self.get_clock().now().nanoseconds)
        for msg in results:
            self.results.publish(msg)
            time.sleep(0.01)
        return len(results)

    def fact_count(self) -> int:
        if self.facts is None:
            return 0
        return max((f.n_observations for f in self.facts.facts if TARGET in f.key), default=0)


def attempt_results(start_ns: int) -> list[ExecutionResult]:
    """The scenario's grasps as the skill publishes them, one attempt after start_ns."""
    results = []
    stamp_ns = start_ns
    for number, attempt in enumerate(glass_cup_attempts()):
        stamp_ns += int(ATTEMPT_SECONDS * 1e9)
        msg = ExecutionResult(skill_id=SKILL, target_class=TARGET, environment=ENVIRONMENT,
                              zone="table_1", success=attempt.success,
                              failure_reason=attempt.failure_reason,
                              duration_s=ATTEMPT_SECONDS, intent_id=f"demo-intent-{number}")
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
        msg.parameters = [KeyValue(key="force_n", value=attempt.force_n)]
        msg.observations = [KeyValue(key="mass_kg", value=0.21)]
        results.append(msg)
    return results


def _wait(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def _ask_until_served(planner, timeout_s: float = 30.0):
    """The answer after the pass. The planner sees the new facts on `facts`, and the
    grounding server applies the same pass from `facts_delta` (or, if the delta was lost,
    from the store a diagnostics period or two later): the two do not arrive in step, so
    an answer before the server has caught up is ABSTAIN. Ask again, as a planner would,
    until it answers or the time is up (the last answer is what the demo checks)."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = planner.grounding.query(SKILL, TARGET, ENVIRONMENT, intent_id="demo-after")
        if answer.ok or time.monotonic() > deadline:
            return answer
        time.sleep(0.25)


def _tail(path: Path, lines: int) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _say(text: str) -> None:
    print(text, flush=True)


def run_demo(db_url: str = "", period_s: float = 2.0, keep: bool = False) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="robot_memory_demo_"))
    manifest_path = workdir / "manifest.yaml"
    shutil.copy(EXAMPLE_MANIFEST, manifest_path)
    hash_before = load_manifest(manifest_path).identity_hash()
    (workdir / "certified_hash").write_text(hash_before + "\n")
    db_url = db_url or f"sqlite:///{workdir / 'memory.db'}"
    _say(f"[demo] identity hash before: {hash_before}")
    _say(f"[demo] store: {db_url}")
    node_log = open(workdir / "nodes.log", "wb")
    _say(f"[demo] node logs: {workdir / 'nodes.log'}")
    stack = Stack({"database_url": db_url, "manifest_path": str(manifest_path),
                   "certified_hash_file": str(workdir / "certified_hash"), "period_s": period_s},
                  use_sim_time=True).start(stdout=node_log, stderr=node_log)
    rclpy.init()
    clock, planner = SimClock(), DemoPlanner()
    executor = MultiThreadedExecutor(num_threads=3)
    executor.add_node(clock)
    executor.add_node(planner)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    ok = True
    try:
        _wait(lambda: planner.identity is not None, 60, "manifest_verifier's identity_status")
        if planner.identity.state != IdentityStatus.VERIFIED:
            raise RuntimeError(f"identity not verified: {planner.identity.reason}")
        _say(f"[demo] manifest_verifier: VERIFIED {planner.identity.computed_hash}")
        _wait(lambda: planner.grounding.wait_for_service(0.1), 60, "the 'ground' service")

        # A planner treats IDENTITY_UNVERIFIED as "memory not ready yet" and asks again.
        ready = []
        _wait(lambda: ready.append(planner.grounding.query(SKILL, TARGET, ENVIRONMENT,
                                                           intent_id="demo-before"))
              or ready[-1].status != "IDENTITY_UNVERIFIED", 60, "the memory nodes to activate")
        before = ready[-1]
        _say(f"[demo] planner asks before any experience: {before.status} "
             f"({before.reason_code}: {before.reason})")
        ok &= before.status == "ABSTAIN"

        if not wait_for_subscriber(planner.results, 60):
            raise TimeoutError("timed out after 60 s waiting for episodic_logger to subscribe")
        sent = planner.publish_attempts()
        _say(f"[demo] grasp skill published {sent} results "
             "(3 x 5 N slipped, 1 x 15 N slipped, 12 x 25 N success), sim-time stamps")
        _wait(lambda: planner.fact_count() >= sent, 120, "the consolidator's pass")
        _say(f"[demo] consolidator published facts covering {planner.fact_count()} observations")

        after = _ask_until_served(planner)
        _say(f"[demo] planner asks after consolidation: {after.status}")
        _say(f"[demo] {format_grounding_block(after.facts)}")
        ok &= after.ok and after.recommended_parameters().get("force_n") == 25.0

        hash_after = load_manifest(manifest_path).identity_hash()
        _say(f"[demo] identity hash after:  {hash_after}")
        same = hash_after == hash_before == after.identity_hash
        _say(f"[demo] identity hash byte-equal before and after: {same}")
        ok &= same
    except (TimeoutError, RuntimeError) as exc:
        _say(f"[demo] FAILED: {exc}")
        _say(f"[demo] facts seen cover {planner.fact_count()} observations; "
             f"last lines of {workdir / 'nodes.log'}:")
        node_log.flush()
        _say(_tail(workdir / "nodes.log", LOG_TAIL_LINES))
        ok = False
    finally:
        executor.shutdown()
        spinner.join(timeout=5)
        for node in (clock, planner):
            node.destroy_node()
        rclpy.try_shutdown()
        stack.stop()
        node_log.close()
        if ok and not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    _say("[demo] OK" if ok else "[demo] FAILED")
    return 0 if ok else 1

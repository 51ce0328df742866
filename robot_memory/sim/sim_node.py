"""The simulator node: owns the MuJoCo world, steps it for each grasp attempt and
publishes /clock, as Gazebo does. Between attempts the world rests and sim time runs
at `rate` times the wall clock, so timers on sim time (the consolidator's) keep firing."""

from __future__ import annotations

import threading
import time

from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rosgraph_msgs.msg import Clock as ClockMsg

from robot_memory.sim.scene import GraspOutcome, GraspWorld

SIM_START_S = 1000.0


class SimNode(Node):
    """`physics_of` maps a target class to the object whose physics this world gives it:
    another site may stock, under the same class name, an object that behaves otherwise
    (the transfer experiments' misleading fleet prior)."""

    def __init__(self, rate: float = 5.0, start_s: float = SIM_START_S,
                 physics_of: dict[str, str] | None = None):
        super().__init__("sim_world")
        self.world = GraspWorld()
        self.physics_of = dict(physics_of or {})
        self.rate = rate
        self._lock = threading.Lock()  # one attempt at a time; the clock waits for it
        self._sim_ns = int(start_s * 1e9)
        self._last_wall = time.monotonic()
        self._clock = self.create_publisher(ClockMsg, "/clock", 10)
        self.create_timer(0.01, self.on_idle_timer, clock=Clock(clock_type=ClockType.STEADY_TIME))

    def on_idle_timer(self) -> None:
        with self._lock:
            now = time.monotonic()
            self._sim_ns += int((now - self._last_wall) * self.rate * 1e9)
            self._last_wall = now
            self._publish_clock()

    def run_attempt(self, target: str, force_n: float, episode_seed: int
                    ) -> tuple[GraspOutcome, int]:
        """Step the physics through one attempt; returns the outcome and the sim time (ns)
        at which it ended (the attempt's duration is added to the clock)."""
        with self._lock:
            outcome = self.world.attempt(self.physics_of.get(target, target), force_n,
                                         episode_seed)
            self._sim_ns += int(outcome.duration_s * 1e9)
            self._last_wall = time.monotonic()  # the wall time spent stepping is not idle
            self._publish_clock()
            return outcome, self._sim_ns

    def weigh(self, target: str, episode_seed: int) -> float:
        """The table scale's reading of this episode's object (kg), before the grasp."""
        with self._lock:
            return self.world.weigh(self.physics_of.get(target, target), episode_seed)

    def now_ns(self) -> int:
        with self._lock:
            return self._sim_ns

    def _publish_clock(self) -> None:
        msg = ClockMsg()
        msg.clock.sec, msg.clock.nanosec = divmod(self._sim_ns, 1_000_000_000)
        self._clock.publish(msg)

"""The grasp skill node: executes one attempt in the simulator and publishes its
ExecutionResult on `execution_results` (the topic a Gazebo skill would publish on),
with the force used, the measured grip force and mass, and the failure reason."""

from __future__ import annotations

from rclpy.node import Node
from rclpy.parameter import Parameter

from robot_memory.msg import ExecutionResult, KeyValue
from robot_memory.ros.qos import EXECUTION_RESULTS_QOS
from robot_memory.sim.scene import GraspOutcome
from robot_memory.sim.sim_node import SimNode

SKILL = "manipulation.grasp"
ENVIRONMENT = "sim_mujoco"
ZONE = "table_1"


def result_message(target: str, force_n: float, outcome: GraspOutcome, stamp_ns: int,
                   intent_id: str) -> ExecutionResult:
    msg = ExecutionResult(skill_id=SKILL, target_class=target, environment=ENVIRONMENT,
                          zone=ZONE, success=outcome.success,
                          failure_reason=outcome.failure_reason,
                          duration_s=outcome.duration_s, intent_id=intent_id)
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
    msg.parameters = [KeyValue(key="force_n", value=float(force_n))]
    msg.observations = [KeyValue(key="grip_force_n", value=outcome.grip_force_n)]
    if outcome.success:  # the mass is measured only while the object is held
        msg.observations.append(KeyValue(key="mass_kg", value=outcome.measured_mass_kg))
    return msg


class GraspSkillNode(Node):
    def __init__(self, sim: SimNode, publish: bool = True):
        super().__init__("grasp_skill",
                         parameter_overrides=[Parameter("use_sim_time", value=True)])
        self.sim = sim
        self.publish = publish
        self.results = self.create_publisher(ExecutionResult, "execution_results",
                                             EXECUTION_RESULTS_QOS)
        self.published = 0

    def execute(self, target: str, force_n: float, episode_seed: int,
                intent_id: str) -> GraspOutcome:
        outcome, end_ns = self.sim.run_attempt(target, force_n, episode_seed)
        if self.publish:
            self.results.publish(result_message(target, force_n, outcome, end_ns, intent_id))
            self.published += 1
        return outcome

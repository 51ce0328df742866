"""The planner node: asks robot_memory's `ground` service before every attempt (through
GroundingClient) and decides with robot_memory.sim.policy; without memory it explores.
With `allow_analogies` it also asks for analogies, sending what it measured on the
object (`target_properties`), and explores with the force an ANALOGY answer lends; with
`allow_priors` it asks for fleet priors and explores with the force a PRIOR answer's
sibling recommends."""

from __future__ import annotations

from rclpy.node import Node
from rclpy.parameter import Parameter

from robot_memory.ros.client import GroundingClient
from robot_memory.msg import SemanticFactArray
from robot_memory.ros.qos import FACTS_QOS
from robot_memory.sim.episodes import Episode
from robot_memory.sim.grasp_skill import ENVIRONMENT, SKILL
from robot_memory.sim.policy import BORROW, Decision, PolicyConfig, decide


class PlannerNode(Node):
    def __init__(self, use_memory: bool, config: PolicyConfig = PolicyConfig(),
                 timeout_s: float = 5.0, allow_analogies: bool = False,
                 allow_priors: bool = False):
        super().__init__("sim_planner",
                         parameter_overrides=[Parameter("use_sim_time", value=True)])
        self.use_memory = use_memory
        self.allow_analogies = allow_analogies
        self.allow_priors = allow_priors
        self.lent: dict[str, Decision] = {}  # per target, the last force an analogy lent
        self.config = config
        self.grounding = GroundingClient(self, timeout_s=timeout_s) if use_memory else None
        self.facts: SemanticFactArray | None = None
        if use_memory:
            self.create_subscription(SemanticFactArray, "facts", self.on_facts, FACTS_QOS)

    def on_facts(self, msg: SemanticFactArray) -> None:
        self.facts = msg

    def observations_in_memory(self) -> int:
        """How many attempts the latest facts cover (skill_success_rate counts each once)."""
        if self.facts is None:
            return 0
        return sum(f.n_observations for f in self.facts.facts
                   if f.kind == "skill_success_rate" and ENVIRONMENT in f.key)

    def ask(self, episode: Episode, target_properties: dict[str, float] | None = None):
        """The GroundingResult for this episode's target (analogies and priors only if
        allowed)."""
        extra = {"allow_analogies": True, "target_properties": target_properties or {}} \
            if self.allow_analogies else {}
        if self.allow_priors:
            extra["allow_priors"] = True
        return self.grounding.query(SKILL, episode.target, ENVIRONMENT,
                                    fact_kinds=("skill_success_rate",),
                                    intent_id=f"sim-{episode.number}", **extra)

    def plan(self, episode: Episode, target_properties: dict[str, float] | None = None
             ) -> Decision:
        if not self.use_memory:
            return Decision("explore", episode.exploration_force_n, "no memory")
        return self.answer_and_plan(episode, target_properties)[1]

    def answer_and_plan(self, episode: Episode,
                        target_properties: dict[str, float] | None = None):
        """(the GroundingResult, the Decision); remembers what an analogy lent."""
        answer = self.ask(episode, target_properties)
        decision = decide(answer, episode.exploration_force_n, self.config,
                          lent=self.lent.get(episode.target))
        if decision.action == BORROW:
            self.lent[episode.target] = decision
        return answer, decision

"""The README's planner example, run as written against the demo's data over DDS: the
stack (in the root namespace, where the example's node and its `ground` client are),
the `make run` scenario's 16 grasps, a pass, then the README's Planner class, defined
from the README's own text, asked for a grasp of glass_cup. It gets the skill's force,
although the answer's first fact is the cup's mass."""

import re
import time
from pathlib import Path

import pytest
from rclpy.node import Node

from robot_memory.demo.run_demo import attempt_results
from robot_memory.demo.scenario import ENVIRONMENT, SKILL, TARGET
from robot_memory.msg import KeyValue, SemanticFact
from robot_memory.ros.client import GroundingResult

pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def namespace():
    return ""  # the README's Planner is a node of the root namespace


def planner_block(text: str) -> str:
    section = text.split("## Nodes, topics and services", 1)[-1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_the_planner_example_is_the_same_in_the_readme_and_the_nodes_page():
    readme = planner_block((ROOT / "README.md").read_text())
    nodes = (ROOT / "docs" / "nodes.md").read_text()
    assert planner_block(nodes[nodes.index("### From a planner node"):]) == readme
    assert "facts[0]" not in readme
    for code in ("no_fact", "only_candidates", "stale", "contested"):
        assert f'"{code}"' in readme


def fact(kind: str, confidence: float, **parameters) -> SemanticFact:
    return SemanticFact(kind=kind, key=f"{kind} key", confidence=confidence,
                        recommended_parameters=[KeyValue(key=k, value=v)
                                                for k, v in parameters.items()])


def test_recommended_parameters_are_the_skill_facts_not_the_first_facts():
    mass = fact("object_property", 0.84)
    rate = fact("skill_success_rate", 0.61, force_n=25.0)
    pattern = fact("interaction_pattern", 0.51)
    result = GroundingResult("OK", facts=(mass, rate, pattern))
    assert result.skill_fact() is rate
    assert result.recommended_parameters() == {"force_n": 25.0}
    for empty in (GroundingResult("ABSTAIN", "no_fact", facts=(mass,)),
                  GroundingResult("TIMEOUT", "timeout")):
        assert empty.skill_fact() is None and empty.recommended_parameters() == {}


def test_the_readme_planner_gets_the_force_on_the_demos_data(probe, start_stack,
                                                             ros_executor):
    start_stack()
    probe.wait_identity()
    probe.wait_logger()
    results = attempt_results(probe.get_clock().now().nanoseconds)
    for msg in results:
        probe.results.publish(msg)
    probe.wait_fact(lambda f: f.kind == "skill_success_rate" and TARGET in f.key
                    and f.n_observations == len(results), 60)
    # What the example used to read: the answer's first fact is not the skill's.
    first = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = probe.grounding.query(SKILL, TARGET, ENVIRONMENT, min_confidence=0.5)
        if answer.ok:
            first = answer.facts[0]
            break
        time.sleep(0.2)
    assert first is not None and first.kind == "object_property", answer
    assert list(first.recommended_parameters) == []

    namespace = {"Node": Node}
    exec(compile(planner_block((ROOT / "README.md").read_text()), "README.md", "exec"),
         namespace)
    planner = namespace["Planner"]()
    asked = []
    query = planner.memory.query
    planner.memory.query = lambda *args, **kwargs: asked.append(query(*args, **kwargs)) \
        or asked[-1]
    ros_executor.add_node(planner)
    try:
        # As a planner in its loop: its 50 ms timeout may pass while the client is still
        # being discovered, on a busy machine; it asks again.
        force = None
        deadline = time.monotonic() + 30
        while force is None and time.monotonic() < deadline:
            force = planner.plan_grasp(TARGET, ENVIRONMENT, intent_id="readme-planner")
            time.sleep(0.1)
        assert force == {"force_n": 25.0}, asked[-1:]
        assert asked[-1].ok and planner.prompt_prefix.startswith("known facts for this robot")
    finally:
        ros_executor.remove_node(planner)
        planner.destroy_node()

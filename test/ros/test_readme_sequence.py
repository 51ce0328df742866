"""The README's "On ROS" sequence, run as written: the key made and listed as it says,
the stack started with the same arguments (in the root namespace, as `ros2 launch`
without `namespace` does, and the default pass period), then its `ros2 service call`
requests, read from the README itself and sent through rclpy in its order. The answers
show the pass's effect."""

import importlib
import re
from pathlib import Path

import pytest
import yaml

from robot_memory.srv import Consolidate, GroundingQuery, RecordEvent

from ros.conftest import wait_until
from ros.test_signed_requests import cli

pytestmark = pytest.mark.ros

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture
def namespace():
    return ""  # the README launches without one


def readme_block() -> str:
    section = README.read_text().split("## On ROS: launch, publish, ask", 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)


def fill(message, values: dict):
    """Set `values` (parsed YAML, as `ros2 service call` reads it) on `message`, nested
    messages and sequences of messages included."""
    types = message.get_fields_and_field_types()
    for name, value in values.items():
        kind = types[name]
        if isinstance(value, dict):
            fill(getattr(message, name), value)
        elif isinstance(value, list) and kind.startswith("sequence<") and "/" in kind:
            package, type_name = kind[len("sequence<"):-1].split("/")
            element = getattr(importlib.import_module(f"{package}.msg"), type_name)
            setattr(message, name, [fill(element(), item) for item in value])
        else:
            setattr(message, name, value)
    return message


def test_the_readme_sequence_as_written(probe, start_stack, tmp_path, manifest_file):
    block = readme_block()
    # The key pair, and its public line in the file the nodes read, as the README makes them.
    keygen = re.search(r"python3 -m robot_memory.cli (keygen [^|]*)\|", block).group(1)
    key = tmp_path / "operator"
    keys_file = tmp_path / "operator_keys"
    args = keygen.replace("/tmp/operator", str(key)).split()
    keys_file.write_text(cli(*args).strip().splitlines()[-1] + "\n")
    launch = re.search(r"ros2 launch robot_memory robot_memory.launch.py (.*?)\n# terminal 2",
                       block, re.DOTALL).group(1)
    assert "operator_keys_file:=/tmp/operator_keys" in launch
    # What the README's launch line sets; period_s and the rest at their defaults.
    start_stack(operator_keys=[], operator_keys_file=str(keys_file), period_s=10.0,
                diagnostics_period_s=1.0)
    probe.wait_identity()
    wait_until(lambda: probe.grounding.query("manipulation.grasp").status
               != "IDENTITY_UNVERIFIED", 60, "the grounding server to activate")

    record = re.search(r'for force in ([\d. ]+); do ros2 service call /record_event '
                       r'robot_memory/srv/RecordEvent \\\n\s*"(.*?)"; done', block, re.DOTALL)
    forces, template = record.group(1).split(), record.group(2)
    for force in forces:
        request = fill(RecordEvent.Request(), yaml.safe_load(template.replace("$force", force)))
        answer = probe.call(RecordEvent, "record_event", request)
        assert answer.accepted, answer.reason

    sign = re.search(r'"\$\(python3 -m robot_memory.cli (sign consolidate [^)]*)\)"',
                     block).group(1)
    signed = cli(*sign.replace("/tmp/operator", str(key)).split())
    consolidated = probe.call(Consolidate, "consolidate",
                              fill(Consolidate.Request(), yaml.safe_load(signed)))
    assert consolidated.success, consolidated.reason
    # The pass this call ran, or the timer's pass that got there first (the README says
    # so): either way the facts hold the three results (n: the recommended band's, 25 N:
    # two of them; 24 N is a band of its own).
    ran_it = "+ skill_success_rate [manipulation.grasp + glass_cup + lab] active: n=2" in \
        consolidated.diff
    assert ran_it or "[nothing new to consolidate, nothing written]" in consolidated.diff, \
        consolidated.diff

    ground = re.search(r'ros2 service call /ground robot_memory/srv/GroundingQuery \\\n\s*"(.*?)"',
                       block, re.DOTALL).group(1)
    answer = probe.call(GroundingQuery, "ground",
                        fill(GroundingQuery.Request(), yaml.safe_load(ground)))
    assert answer.status == GroundingQuery.Response.OK, (answer.reason_code, answer.reason)
    [fact] = [f for f in answer.facts if f.kind == "skill_success_rate"]
    assert fact.n_observations == len(forces) == 3
    assert {kv.key: kv.value for kv in fact.recommended_parameters} == {"force_n": 25.0}

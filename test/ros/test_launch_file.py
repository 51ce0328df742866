"""launch/robot_memory.launch.py, loaded with the real `launch` / `launch_ros` packages:
four Node actions by default, one (robot_memory_all) with one_process:=true, and the
one-process parameter file with the launch arguments filled in. Skipped where those
packages are not installed (they come with a ROS 2 install, not from PyPI)."""

import importlib.util
from pathlib import Path

import pytest
import yaml

from robot_memory.parameters import node_names

LAUNCH_FILE = Path(__file__).resolve().parents[2] / "launch" / "robot_memory.launch.py"


def ros_launch():
    """The ROS 2 launch packages, or a skip (PyPI's unrelated `launch` does not count)."""
    try:
        import launch
        import launch_ros.actions
        from launch_ros.parameter_descriptions import ParameterFile
    except ImportError as exc:
        pytest.skip(f"ROS 2 launch / launch_ros are not importable here ({exc}); they come "
                    "with a ROS 2 install, not from PyPI")
    if not hasattr(launch, "LaunchDescription"):
        pytest.skip("the `launch` module here is not ROS 2's launch")
    return launch, launch_ros.actions.Node, ParameterFile


def load_description(launch):
    spec = importlib.util.spec_from_file_location("robot_memory_launch", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, module.generate_launch_description()


def context_with(launch, description, **arguments):
    context = launch.LaunchContext()
    for action in description.entities:
        if isinstance(action, launch.actions.DeclareLaunchArgument):
            context.launch_configurations[action.name] = arguments.get(
                action.name, "".join(part.perform(context) for part in action.default_value))
    return context


@pytest.mark.parametrize("one_process", ["false", "true"])
def test_launch_file_starts_four_processes_or_one(one_process):
    launch, node_action, _ = ros_launch()
    _, description = load_description(launch)
    context = context_with(launch, description, one_process=one_process)
    started = []
    for action in description.entities:
        # The one-process node comes from an OpaqueFunction, made only when asked for.
        made = (action.execute(context) or [] if isinstance(action, launch.actions.OpaqueFunction)
                else [action])
        started += [entity.node_executable for entity in made if isinstance(entity, node_action)
                    and (entity.condition is None or entity.condition.evaluate(context))]
    expected = ["robot_memory_all"] if one_process == "true" else node_names()
    assert sorted(started) == sorted(expected)


def test_one_process_parameter_file_has_a_section_per_node():
    launch, _, parameter_file = ros_launch()
    module, description = load_description(launch)
    context = context_with(launch, description, certified_hash="0123456789",
                           database_url="sqlite:////tmp/m.db", use_sim_time="true")
    template = parameter_file(module.one_process_params_template(), allow_substs=True)
    document = yaml.safe_load(Path(template.evaluate(context)).read_text())  # while it lives
    assert sorted(document) == sorted(f"/**/{name}" for name in node_names())
    verifier = document["/**/manifest_verifier"]["ros__parameters"]
    assert verifier["certified_hash"] == "0123456789"  # digits stay a string
    for section in document.values():
        assert section["ros__parameters"]["use_sim_time"] is True
        assert section["ros__parameters"]["database_url"] == "sqlite:////tmp/m.db"


def test_a_one_process_launch_leaves_no_parameter_file_behind(tmp_path, monkeypatch):
    """The template the one-process node's parameters come from is removed as its process
    starts (launch has read it by then) or, at the latest, when the launch shuts down."""
    import tempfile
    launch, node_action, _ = ros_launch()
    from launch.event_handlers import OnProcessStart, OnShutdown
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the template goes
    _, description = load_description(launch)
    context = context_with(launch, description, one_process="true")
    [opaque] = [a for a in description.entities
                if isinstance(a, launch.actions.OpaqueFunction)]
    made = opaque.execute(context)
    [template] = list(tmp_path.iterdir())
    [node] = [entity for entity in made if isinstance(entity, node_action)]
    handlers = [entity.event_handler for entity in made
                if isinstance(entity, launch.actions.RegisterEventHandler)]
    assert any(isinstance(h, OnProcessStart) for h in handlers)
    [on_shutdown] = [h for h in handlers if isinstance(h, OnShutdown)]
    on_shutdown.handle(launch.events.Shutdown(), context)
    assert not template.exists() and list(tmp_path.iterdir()) == []

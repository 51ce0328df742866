"""launch/robot_memory.launch.py, loaded with the real `launch` / `launch_ros` packages:
four Node actions by default, one (robot_memory_all) with one_process:=true, and the
one-process parameter file with the launch arguments filled in. Skipped where those
packages are not installed (they come with a ROS 2 install, not from PyPI)."""

import importlib.util
from pathlib import Path

import pytest
import yaml

from robot_memory.operation.parameters import node_names

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


def made_by(launch, description, context) -> list:
    """What the launch file's OpaqueFunction makes once the arguments are known."""
    return [entity for action in description.entities
            if isinstance(action, launch.actions.OpaqueFunction)
            for entity in action.execute(context) or []]


@pytest.mark.parametrize("one_process", ["false", "true"])
def test_launch_file_starts_four_processes_or_one(one_process):
    launch, node_action, _ = ros_launch()
    _, description = load_description(launch)
    context = context_with(launch, description, one_process=one_process)
    started = [entity.node_executable for entity in made_by(launch, description, context)
               if isinstance(entity, node_action)]
    expected = ["robot_memory_all"] if one_process == "true" else node_names()
    assert sorted(started) == sorted(expected)


@pytest.mark.parametrize("one_process", ["false", "true"])
def test_the_files_the_launch_writes_hold_the_arguments_over_every_section(
        one_process, tmp_path, monkeypatch):
    """The launch file writes launch_parameters.parameter_sources' documents (what those
    sources do in rcl: test/ros/test_launch_parameter_order.py)."""
    import tempfile
    launch, node_action, _ = ros_launch()
    _, description = load_description(launch)
    params_file = tmp_path / "params.yaml"
    params_file.write_text("/**:\n  ros__parameters:\n    use_sim_time: true\n")
    written = tmp_path / "written"
    written.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(written))
    context = context_with(launch, description, certified_hash="0123456789",
                           database_url="sqlite:////tmp/m.db", use_sim_time="false",
                           params_file=str(params_file), one_process=one_process)
    made_by(launch, description, context)
    documents = [yaml.safe_load(path.read_text()) for path in written.iterdir()]
    arguments = [d for d in documents if list(d) == ["/**"]]
    assert len(arguments) == (1 if one_process == "true" else 4)
    for document in arguments:
        values = document["/**"]["ros__parameters"]
        assert values["use_sim_time"] is False and values["database_url"] == "sqlite:////tmp/m.db"
    assert any(d["/**"]["ros__parameters"].get("certified_hash") == "0123456789"
               for d in arguments)  # digits stay a string


def test_a_launch_leaves_no_parameter_file_behind(tmp_path, monkeypatch):
    """The files the launch writes are removed when it shuts down."""
    import tempfile
    launch, node_action, _ = ros_launch()
    from launch.event_handlers import OnShutdown
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the files go
    _, description = load_description(launch)
    context = context_with(launch, description, one_process="true")
    made = made_by(launch, description, context)
    assert list(tmp_path.iterdir())
    handlers = [entity.event_handler for entity in made
                if isinstance(entity, launch.actions.RegisterEventHandler)]
    [on_shutdown] = [h for h in handlers if isinstance(h, OnShutdown)]
    on_shutdown.handle(launch.events.Shutdown(), context)
    assert list(tmp_path.iterdir()) == []

"""The Gazebo launch file: loadable by the real launch system, sim time on, /clock bridged
where ros_gz_bridge is installed."""

import ast
from pathlib import Path

import pytest

LAUNCH_DIR = Path(__file__).resolve().parents[2] / "launch"
GAZEBO_LAUNCH = LAUNCH_DIR / "robot_memory_gazebo.launch.py"


def test_gazebo_launch_file_includes_the_stack_launch_file_with_sim_time():
    """Without `launch` installed: the file parses and names what it includes."""
    tree = ast.parse(GAZEBO_LAUNCH.read_text())
    strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)}
    assert "robot_memory.launch.py" in strings and (LAUNCH_DIR / "robot_memory.launch.py").exists()
    assert "use_sim_time" in strings and "true" in strings


def _require_launch():
    # A bare `import launch` would find this checkout's launch/ directory (a namespace
    # package); the real launch system has launch.actions.
    pytest.importorskip("launch.actions",
                        reason="the ROS 2 `launch` package is not installed (it is not on PyPI)")


def test_gazebo_launch_file_loads_in_the_real_launch_system():
    _require_launch()
    import launch
    from launch.actions import IncludeLaunchDescription
    from launch.launch_description_sources import get_launch_description_from_python_launch_file

    description = get_launch_description_from_python_launch_file(str(GAZEBO_LAUNCH))
    assert isinstance(description, launch.LaunchDescription)
    includes = [e for e in description.entities if isinstance(e, IncludeLaunchDescription)]
    assert len(includes) == 1
    from launch.utilities import normalize_to_list_of_substitutions, perform_substitutions
    context = launch.LaunchContext()
    context.launch_configurations["use_sim_time"] = "true"  # the file's default

    def text(part) -> str:
        return perform_substitutions(context, normalize_to_list_of_substitutions(part))

    arguments = {text(key): text(value) for key, value in includes[0].launch_arguments}
    assert arguments == {"use_sim_time": "true"}
    module = {"__file__": str(GAZEBO_LAUNCH)}
    exec(compile(GAZEBO_LAUNCH.read_text(), str(GAZEBO_LAUNCH), "exec"), module)
    names = [type(e).__name__ for e in description.entities]
    assert ("Node" in names) == module["ros_gz_bridge_installed"]()
    assert ("LogInfo" in names) != module["ros_gz_bridge_installed"]()


def test_included_stack_launch_file_starts_the_four_nodes():
    _require_launch()
    pytest.importorskip("launch_ros", reason="`launch_ros` is not installed")
    import launch
    from launch.actions import IncludeLaunchDescription
    from launch.launch_description_sources import get_launch_description_from_python_launch_file

    description = get_launch_description_from_python_launch_file(str(GAZEBO_LAUNCH))
    include = next(e for e in description.entities if isinstance(e, IncludeLaunchDescription))
    context = launch.LaunchContext()
    included = include.launch_description_source.get_launch_description(context)
    for action in included.entities:  # the arguments' defaults, as launch would set them
        if isinstance(action, launch.actions.DeclareLaunchArgument):
            context.launch_configurations[action.name] = "".join(
                part.perform(context) for part in action.default_value)
    made = [entity for action in included.entities
            if isinstance(action, launch.actions.OpaqueFunction)
            for entity in action.execute(context) or []]
    assert sum(type(e).__name__ == "Node" for e in made) == 4

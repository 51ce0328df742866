"""The ROS boundary is a set of folders: rclpy is used in `robot_memory/ros/` (the nodes
and the planner-side client) and in the two adapter packages `demo/` and `sim/`, nowhere
else. Every other module is the core and imports with rclpy unavailable."""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "robot_memory"
ROS_FOLDERS = ("ros", "demo", "sim")
ROS_PACKAGES = tuple(f"robot_memory.{folder}" for folder in ROS_FOLDERS)
ROS_IMPORTS = ("rclpy", "launch", "rosgraph_msgs", "diagnostic_msgs", "lifecycle_msgs")


def _imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_no_module_outside_the_ros_folders_imports_ros():
    core = [p for p in PACKAGE.rglob("*.py")
            if p.relative_to(PACKAGE).parts[0] not in ROS_FOLDERS]
    assert len(core) >= 60  # the whole core, not a few modules
    offenders = {str(p.relative_to(PACKAGE)): sorted(_imported(p) & set(ROS_IMPORTS))
                 for p in core if _imported(p) & set(ROS_IMPORTS)}
    assert offenders == {}, f"move these into ros/ (or an adapter package): {offenders}"


def test_core_imports_without_rclpy():
    # The source tree's modules only: a colcon install beside it on the package path may
    # still hold copies of modules that have moved since it was built.
    code = ("import importlib, pkgutil, sys; sys.modules['rclpy'] = None\n"
            "import robot_memory\n"
            "names = [m.name for m in pkgutil.walk_packages([%r], "
            "'robot_memory.') if not m.name.startswith(%r)]\n"
            "for name in names: importlib.import_module(name)\n"
            "print(len(names))") % (str(PACKAGE), ROS_PACKAGES)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) >= 60


def test_the_ros_side_does_need_rclpy():
    for module in ("robot_memory.ros.spin", "robot_memory.ros.client",
                   "robot_memory.demo.run_demo", "robot_memory.sim.run_sim"):
        code = f"import sys; sys.modules['rclpy'] = None\nimport importlib\n" \
               f"importlib.import_module({module!r})"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert out.returncode != 0 and "rclpy" in out.stderr, module

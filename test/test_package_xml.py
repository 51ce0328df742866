"""package.xml as ROS tools read it (catkin_pkg: rosdep, colcon, bloom): it parses and
validates without a warning, and agrees with the Python package."""

from pathlib import Path

from catkin_pkg.package import parse_package

import robot_memory

ROOT = Path(__file__).resolve().parents[1]


def test_package_xml_parses_and_validates_without_warnings():
    warnings = []
    package = parse_package(str(ROOT), warnings=warnings)
    package.validate(warnings=warnings)
    assert warnings == []
    assert (package.name, package.version) == ("robot_memory", robot_memory.__version__)
    assert package.get_build_type() == "ament_cmake"
    tests = {dependency.name for dependency in package.test_depends}
    assert {"ament_flake8", "ament_pep257", "python3-pytest"} <= tests

"""The install tree that `make setup` builds holds real files where the ros2 tools look.

`ros2 launch robot_memory robot_memory.launch.py` finds the file as ros2launch does:
the package's prefix from the ament index, then `os.walk` over its share directory,
which does not follow directory links. `ros2 run` lists `lib/robot_memory`.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "robot_memory"


def package_prefix(package: str) -> Path:
    """The first prefix on AMENT_PREFIX_PATH whose ament index lists the package (what
    ament_index_python.get_package_prefix does; read directly if it is not installed)."""
    try:
        from ament_index_python.packages import get_package_prefix
    except ImportError:
        for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
            marker = Path(prefix, "share", "ament_index", "resource_index", "packages", package)
            if prefix and marker.is_file():
                return Path(prefix)
        raise AssertionError(f"{package} is in no ament index on AMENT_PREFIX_PATH")
    return Path(get_package_prefix(package))


def find_like_ros2launch(package: str, file_name: str) -> list[Path]:
    share = package_prefix(package) / "share" / package
    return [Path(path, file_name) for path, _dirs, files in os.walk(share)
            if file_name in files]


def test_launch_file_is_found_by_name_in_the_share_directory():
    found = find_like_ros2launch(PACKAGE, "robot_memory.launch.py")
    assert len(found) == 1, f"ros2 launch would not find robot_memory.launch.py: {found}"
    assert found[0].read_bytes() == (ROOT / "launch" / "robot_memory.launch.py").read_bytes()


def test_no_links_where_ros2_tools_look():
    prefix = package_prefix(PACKAGE)
    places = [prefix / "share" / PACKAGE, prefix / "lib" / PACKAGE,
              prefix / "share" / "ament_index"]
    links = [Path(path, name) for place in places for path, dirs, files in os.walk(place)
             for name in dirs + files if Path(path, name).is_symlink()]
    assert links == []
    assert (prefix / "share" / PACKAGE / "package.xml").is_file()


def test_ros2_run_sees_every_node_executable():
    lib = package_prefix(PACKAGE) / "lib" / PACKAGE
    executables = sorted(p.name for p in lib.iterdir()
                         if p.is_file() and os.access(p, os.X_OK))
    assert executables == sorted(p.name for p in (ROOT / "nodes").iterdir())

"""Every third-party module the nodes and the command line import is declared where an
install finds it: its rosdep key in package.xml, its pip name pinned in
requirements/python.txt and, on a real ROS 2 install, installed by the README's (and
docs/install.md's) pip line or by rosdep.

Read from the source with `ast`, nothing imported: every `import` of the node entry
points (nodes/), the node modules (robot_memory/ros/) and the command line
(robot_memory/cli/), and of every robot_memory module they import, transitively, at
module level or inside a function (a verb's import is the verb's dependency). An import
in a `try` whose handler catches ImportError is optional (orjson) and is not counted.
The MuJoCo simulation (robot_memory/sim, `robot-memory demo --sim`) is an example: its
own dependencies are held to requirements/python.txt and to the example's pip line in
docs/install.md, not to package.xml."""

import ast
import re
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_PACKAGES = ("robot_memory.sim",)


class Dependency(NamedTuple):
    rosdep: str | None  # the rosdep key (None: rosdep has none)
    pip: str | None  # the requirement's name on PyPI (None: comes with the ROS install)


def ros(name: str) -> Dependency:
    """A ROS package: its own rosdep key, from the ROS install (or requirements/ros.txt)."""
    return Dependency(name, None)


# Top-level module -> how it is installed. A module missing here fails the test: add it,
# then declare it where the test says.
DEPENDENCIES = {
    "rclpy": ros("rclpy"),
    "rcl_interfaces": ros("rcl_interfaces"),
    "builtin_interfaces": ros("builtin_interfaces"),
    "std_msgs": ros("std_msgs"),
    "diagnostic_msgs": ros("diagnostic_msgs"),
    "lifecycle_msgs": ros("lifecycle_msgs"),
    "rosgraph_msgs": ros("rosgraph_msgs"),
    "sqlalchemy": Dependency("python3-sqlalchemy", "SQLAlchemy"),
    "pydantic": Dependency("python3-pydantic", "pydantic"),
    "numpy": Dependency("python3-numpy", "numpy"),
    "yaml": Dependency("python3-yaml", "PyYAML"),
    "cryptography": Dependency("python3-cryptography", "cryptography"),  # signed checkpoints
    "matplotlib": Dependency("python3-matplotlib", "matplotlib"),  # `report`
    "tqdm": Dependency("python3-tqdm", "tqdm"),  # `import-bag`'s progress
    "rosbags": Dependency(None, "rosbags"),  # `import-bag`
    "zstandard": Dependency(None, "zstandard"),  # compressed archive segments
    # backports.zstd (zstd before Python 3.14), a requirement of rosbags itself.
    "backports": Dependency(None, None),
    "scipy": Dependency("python3-scipy", "scipy"),  # the simulation example
    "mujoco": Dependency(None, "mujoco"),  # the simulation example
}


def module_file(name: str) -> Path | None:
    path = ROOT.joinpath(*name.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.exists():
            return candidate
    return None


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = [handler.type] if not isinstance(handler.type, ast.Tuple) else handler.type.elts
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError")
               for n in names)


def imported_names(path: Path) -> list[str]:
    """Dotted names one file imports (`from a import b`: a and a.b), optional ones left
    out."""
    optional: set[int] = set()
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(map(_catches_import_error, node.handlers)):
            optional.update(id(inner) for statement in node.body
                            for inner in ast.walk(statement))
    names = []
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import"
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def third_party_imports() -> dict[str, dict[str, set[str]]]:
    """{"runtime" | "example": {top-level module: files importing it}}."""
    roots = sorted([*(ROOT / "nodes").iterdir(), *(ROOT / "robot_memory" / "ros").glob("*.py"),
                    *(ROOT / "robot_memory" / "cli").glob("*.py")])
    found: dict[str, dict[str, set[str]]] = {"runtime": {}, "example": {}}
    todo, seen = list(roots), set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        where = str(path.relative_to(ROOT))
        tier = ("example" if where.replace("/", ".").startswith(EXAMPLE_PACKAGES)
                else "runtime")
        for name in imported_names(path):
            top = name.split(".")[0]
            if top == "robot_memory":
                parts = name.split(".")
                # the module, and the packages above it (their __init__ runs first)
                todo += [f for f in (module_file(".".join(parts[:n]))
                                     for n in range(1, len(parts) + 1)) if f]
            elif top not in sys.stdlib_module_names and top != "__future__":
                found[tier].setdefault(top, set()).add(where)
    return found


def declared_keys() -> set[str]:
    package = ElementTree.parse(ROOT / "package.xml").getroot()
    return {e.text.strip() for e in package if e.tag in ("exec_depend", "depend")}


def pinned() -> set[str]:
    lines = (ROOT / "requirements" / "python.txt").read_text().splitlines()
    return {re.split(r"[\[=<>~ ]", line, maxsplit=1)[0].lower()
            for line in lines if line.strip() and not line.startswith("#")}


def pip_line(page: str, marker: str = "") -> set[str]:
    """The names a page's `pip install $(grep -E '^(A|B)' .../python.txt)` line picks
    (the first such line, or the first with `marker` on it)."""
    for line in (ROOT / page).read_text().splitlines():
        found = re.search(r"pip install \$\(grep -E '\^\(([^)]*)\)'", line)
        if found and marker in line:
            return {name.lower() for name in found.group(1).split("|")}
    raise AssertionError(f"{page}: no pip line{f' with {marker!r}' if marker else ''}")


def rosdep_skipped(page: str) -> set[str]:
    found = re.search(r'rosdep install .*--skip-keys "([^"]*)"', (ROOT / page).read_text())
    assert found, f"{page}: no rosdep line with --skip-keys"
    return set(found.group(1).split())


def missing_declarations() -> list[str]:
    """What is imported and not declared, one line each (empty: all declared)."""
    found, keys, pins = third_party_imports(), declared_keys(), pinned()
    problems = []
    for tier, modules in found.items():
        for module, files in sorted(modules.items()):
            if module not in DEPENDENCIES:
                problems.append(f"{module} (imported by {sorted(files)[0]}): not in "
                                "DEPENDENCIES; add its rosdep key and pip name")
    for module, files in sorted(found["runtime"].items()):
        dependency = DEPENDENCIES.get(module)
        if dependency is None:
            continue
        where = sorted(files)[0]
        if dependency.rosdep and dependency.rosdep not in keys:
            problems.append(f"{module} (imported by {where}): package.xml has no "
                            f"<exec_depend>{dependency.rosdep}</exec_depend>")
        if dependency.pip is None:
            continue
        if dependency.pip.lower() not in pins:
            problems.append(f"{module} (imported by {where}): {dependency.pip} is not "
                            "pinned in requirements/python.txt")
        for page in ("README.md", "docs/install.md"):
            from_pip = dependency.pip.lower() in pip_line(page)
            from_rosdep = dependency.rosdep and dependency.rosdep not in rosdep_skipped(page)
            if not (from_pip or from_rosdep):
                problems.append(f"{module} (imported by {where}): installed neither by "
                                f"{page}'s pip line nor by its rosdep line")
    for module, files in sorted(found["example"].items()):
        dependency = DEPENDENCIES.get(module)
        if module in found["runtime"] or dependency is None or dependency.pip is None:
            continue
        if dependency.pip.lower() not in pins:
            problems.append(f"{module} (imported by {sorted(files)[0]}): {dependency.pip} "
                            "is not pinned in requirements/python.txt")
        if dependency.pip.lower() not in pip_line("docs/install.md", "demo --sim"):
            problems.append(f"{module} (imported by {sorted(files)[0]}): not in "
                            "docs/install.md's pip line for `demo --sim`")
    return problems


def test_the_scan_finds_what_the_nodes_and_the_command_line_import():
    found = third_party_imports()
    assert {"rclpy", "sqlalchemy", "pydantic", "yaml", "numpy", "cryptography", "rosbags",
            "matplotlib"} <= set(found["runtime"])
    assert "robot_memory/evidence/witness.py" in found["runtime"]["cryptography"]
    assert "mujoco" in found["example"] and "mujoco" not in found["runtime"]
    assert "orjson" not in found["runtime"]  # optional: imported in a try


def test_every_runtime_import_is_declared():
    assert missing_declarations() == []


def test_every_python_key_of_package_xml_is_imported():
    """No stale declaration: each python3-* key is some imported module's key."""
    found = third_party_imports()["runtime"]
    used = {DEPENDENCIES[m].rosdep for m in found if m in DEPENDENCIES}
    assert {k for k in declared_keys() if k.startswith("python3-")} <= used


def test_the_readme_and_the_install_page_install_the_same():
    assert pip_line("README.md") == pip_line("docs/install.md")
    assert rosdep_skipped("README.md") == rosdep_skipped("docs/install.md")


# Optional modules, imported in a `try` that catches ImportError (so the scan above leaves
# them out): their pip name, and the page whose pip line installs them.
OPTIONAL = {"mcp": ("mcp", "docs/planners.md"), "py_trees": ("py_trees", "docs/planners.md")}


def test_optional_dependencies_are_pinned_and_installed_by_their_page():
    pins = pinned()
    for module, (pip, page) in OPTIONAL.items():
        assert pip.lower() in pins, f"{module}: {pip} is not pinned in requirements/python.txt"
        assert pip.lower() in pip_line(page), f"{module}: not in {page}'s pip line"
    found = third_party_imports()
    assert not set(OPTIONAL) & (set(found["runtime"]) | set(found["example"])), \
        "an optional module is imported outside a try that catches ImportError"

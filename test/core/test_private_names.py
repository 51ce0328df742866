"""Private names of other libraries are used in one module only,
robot_memory/ros/rclpy_internals.py, and the README counts them from its PRIVATE_NAMES.

Read from the source with `ast`, nothing imported (rclpy need not be installed). A
private attribute read on something other than `self` or `cls` is one of the module's
own (a copy of its own class: the module defines the name), one of the few whose
underscore does not make them private (a named tuple's `_make`, `os._exit`), or a
private name of a library, which belongs in rclpy_internals.py.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "robot_memory"
INTERNALS = PACKAGE / "ros" / "rclpy_internals.py"
# Documented public API despite the underscore: namedtuple's methods, os._exit.
PUBLIC_DESPITE_UNDERSCORE = {"_make", "_fields", "_replace", "_asdict", "_field_defaults",
                             "_exit"}
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _own_names(tree: ast.Module) -> set[str]:
    """The private names a module defines: functions, classes, `self.x` / `cls.x`
    assignments, and class-level assignments."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Attribute):
                        names.add(part.attr)
                    elif isinstance(part, ast.Name):
                        names.add(part.id)
    return {name for name in names if _private(name)}


def foreign_private_uses(path: Path, root: Path = ROOT) -> list[str]:
    """Each use in a module of a private name it does not define itself, in the order
    of the source, as `file:line name`."""
    tree = ast.parse(path.read_text(), str(path))
    where = path.relative_to(root)
    own = _own_names(tree)
    found = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute) and _private(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                name = node.attr
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
              and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and _private(node.args[1].value)):
            name = node.args[1].value
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and not node.module.startswith("robot_memory"):
            private = [a.name for a in node.names if _private(a.name)]
            if private or any(_private(part) for part in node.module.split(".")):
                found.append((node.lineno, f"{where}:{node.lineno} {node.module}"))
            continue
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(_private(part) for part in alias.name.split(".")):
                    found.append((node.lineno, f"{where}:{node.lineno} {alias.name}"))
            continue
        if name and name not in own and name not in PUBLIC_DESPITE_UNDERSCORE:
            found.append((node.lineno, f"{where}:{node.lineno} {name}"))
    return [use for _line, use in sorted(found)]


def test_no_module_but_rclpy_internals_uses_a_private_name_of_a_library():
    found = [use for path in sorted(PACKAGE.rglob("*.py")) if path != INTERNALS
             for use in foreign_private_uses(path)]
    assert found == [], "private names outside ros/rclpy_internals.py: " + ", ".join(found)


def test_the_scan_finds_what_it_looks_for(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import os\nfrom json.encoder import _x\n"
                      "class A:\n    def __init__(self):\n        self._mine = 1\n"
                      "    def copy(self, other):\n        return other._mine\n"
                      "def f(executor, row):\n    os._exit(0)\n    row._make(())\n"
                      "    return getattr(executor, '_futures', ()), executor._nodes\n")
    uses = [use.split(" ")[-1] for use in foreign_private_uses(module, tmp_path)]
    assert uses == ["json.encoder", "_futures", "_nodes"]


def _private_names_count() -> int:
    tree = ast.parse(INTERNALS.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets
                                             if isinstance(t, ast.Name)] == ["PRIVATE_NAMES"]:
            assert isinstance(node.value, ast.Tuple)
            return len(node.value.elts)
    raise AssertionError("rclpy_internals.py has no PRIVATE_NAMES")


def test_readme_counts_the_private_names_of_rclpy_internals():
    readme = " ".join((ROOT / "README.md").read_text().split())
    match = re.search(r"(\w+) private rclpy attributes are used", readme)
    assert match, "the README no longer says how many private rclpy attributes are used"
    assert NUMBERS[match.group(1).lower()] == _private_names_count()
    assert "robot_memory/ros/rclpy_internals.py" in readme[match.start():match.start() + 400]

"""No module of robot_memory imports one that imports it back, directly or around a loop.

Read from the source with `ast`, nothing imported: every `import` and `from ... import`
of a robot_memory module counts, at module level or inside a function. An import moved
into a function to dodge a cycle still makes one: the two modules need each other, and
the order in which they are first imported decides whether it works.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "robot_memory"


def module_files(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module under the package."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The robot_memory modules one module imports. `from a import b` names the module
    a.b when b is one, else a. Importing a.b also runs a's __init__ first, but that is
    no edge here: a package's face imports its own modules, and Python allows a module
    of a package being initialised to be imported (it is no cycle a reader must untie)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, one level up per dot after the first
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in modules else base)
    return {module for module in found if module in modules and module != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path whose last module is its first, or None."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(module: str) -> list[str] | None:
        path.append(module)
        on_path.add(module)
        for target in sorted(graph[module]):
            if target in on_path:
                return path[path.index(target):] + [target]
            if target not in done:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        on_path.discard(module)
        done.add(module)
        return None

    for module in sorted(graph):
        if module not in done:
            cycle = visit(module)
            if cycle:
                return cycle
    return None


def test_no_import_cycles():
    modules = module_files(PACKAGE)
    graph = {name: imported_modules(name, path, modules) for name, path in modules.items()}
    assert len(graph) > 50 and graph["robot_memory.cli"], "the modules were not read"
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    package = tmp_path / "robot_memory"
    (package / "store").mkdir(parents=True)
    for name, text in {"__init__.py": "", "store/__init__.py": "from .opening import Store\n",
                       "store/opening.py": "def open():\n    from . import migration\n",
                       "store/migration.py": "from robot_memory.store.opening import open\n",
                       "cli.py": "import robot_memory.store\n"}.items():
        (package / name).write_text(text)
    modules = module_files(package)
    graph = {name: imported_modules(name, path, modules) for name, path in modules.items()}
    assert graph["robot_memory.cli"] == {"robot_memory.store"}
    assert find_cycle(graph) == ["robot_memory.store.opening", "robot_memory.store.migration",
                                 "robot_memory.store.opening"]

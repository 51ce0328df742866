"""No module of robot_memory imports one that imports it back, directly or around a loop;
and between its parts (its folders, and the kernel modules at its top), every import
goes down the layers docs/architecture.md's Layout table declares.

Read from the source with `ast`, nothing imported: every `import` and `from ... import`
of a robot_memory module counts, at module level or inside a function. An import moved
into a function to dodge a cycle still makes one: the two modules need each other, and
the order in which they are first imported decides whether it works.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "robot_memory"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
KERNEL = "kernel"

# Imports that still go up a layer, each with what turns it. An entry whose import is
# gone fails the test: remove it then. A new one is not added here; the module moves.
KNOWN_UPWARD: dict[tuple[str, str], str] = {}


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


def layers() -> dict[str, int]:
    """Part -> layer, from the Layout table of docs/architecture.md."""
    text = ARCHITECTURE.read_text()
    table = text[text.index("| layer | part |"):]
    table = table[:table.index("\n\n")]
    found = {}
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        found[cells[1]] = int(cells[0])
    return found


def part_of(module: str) -> str:
    """robot_memory.<folder>... -> folder; a module at the top of the package -> kernel."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (PACKAGE / parts[-1]).is_dir() else KERNEL


def module_graph() -> dict[str, set[str]]:
    modules = module_files(PACKAGE)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def test_every_part_has_a_layer():
    declared = layers()
    assert set(declared) >= {part_of(module) for module in module_graph()}


def test_parts_import_only_parts_of_a_lower_layer():
    declared, graph = layers(), module_graph()
    upward, seen = [], set()
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            source_part, target_part = part_of(module), part_of(target)
            if source_part == target_part:
                continue
            if declared[target_part] >= declared[source_part]:
                seen.add((module, target))
                if (module, target) not in KNOWN_UPWARD:
                    upward.append(f"{module} ({source_part}, layer {declared[source_part]})"
                                  f" -> {target} ({target_part}, layer "
                                  f"{declared[target_part]})")
    assert upward == [], "imports against docs/architecture.md's layers:\n" + "\n".join(upward)
    assert set(KNOWN_UPWARD) <= seen, f"no longer imported: {set(KNOWN_UPWARD) - seen}"


def test_no_cycle_between_parts():
    graph: dict[str, set[str]] = {}
    for module, targets in module_graph().items():
        for target in targets:
            if (module, target) not in KNOWN_UPWARD and part_of(module) != part_of(target):
                graph.setdefault(part_of(module), set()).add(part_of(target))
    for targets in list(graph.values()):
        for target in targets:
            graph.setdefault(target, set())
    assert len(graph) > 10, "the parts were not read"
    cycle = find_cycle(graph)
    assert cycle is None, "cycle between parts: " + " -> ".join(cycle)


def test_the_layers_are_read_from_the_table():
    declared = layers()
    assert declared[KERNEL] == 0 and declared["cli"] == max(declared.values())
    assert all(re.fullmatch(r"[a-z_]+", part) for part in declared), declared

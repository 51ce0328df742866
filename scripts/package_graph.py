"""Print robot_memory's import graph between its parts (top-level packages; the kernel
modules at the top level count as one part, `kernel`), read from the source with ast.

    python scripts/package_graph.py [PACKAGE_DIR]

One line per part: the parts it imports, with how many module imports make each arrow.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path


def part_of(module: str) -> str:
    """`robot_memory.store.log` -> `store`; a top-level module -> `kernel`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or _is_package.get(module, False) else "kernel"


_is_package: dict[str, bool] = {}


def modules_of(package: Path) -> dict[str, Path]:
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
            _is_package[".".join(parts)] = True
        found[".".join(parts)] = path
    return found


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                found.add(target if target in modules else node.module)
    return {module for module in found if module in modules}


def main() -> int:
    package = Path(sys.argv[1]) if len(sys.argv) > 1 else \
        Path(__file__).resolve().parents[1] / "robot_memory"
    modules = modules_of(package)
    arrows: dict[str, Counter] = {}
    for name, path in modules.items():
        if name == "robot_memory":
            continue
        source = part_of(name)
        for target in imports_of(path, modules):
            if target == "robot_memory":
                continue
            into = part_of(target)
            if into != source:
                arrows.setdefault(source, Counter())[into] += 1
    for source in sorted({part_of(m) for m in modules if m != "robot_memory"}):
        targets = arrows.get(source, Counter())
        listed = ", ".join(f"{t} ({n})" for t, n in sorted(targets.items()))
        print(f"{source:14s} -> {listed or '(nothing)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

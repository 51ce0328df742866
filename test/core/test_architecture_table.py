"""docs/architecture.md's Layout table is the folder list of robot_memory/: one row per
folder that is a Python package, one row (kernel) naming every module at the package's
top, and every module, file or folder a row names exists. DEVELOPING.md's table maps
the same parts."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "robot_memory"
KERNEL = "kernel"
# A backticked name in a cell that is a file or a folder: `x.py`, `x.yaml`, `x.xml`, `x/`,
# or a pattern such as `transfer*.py`.
PATH_NAME = re.compile(r"`([\w*./]+(?:\.py|\.yaml|\.xml|/))`")


def table_rows(text: str, header: str) -> dict[str, list[str]]:
    """First cell after the layer (or the first cell) -> the row's cells, of the table
    whose header line starts with `header`."""
    table = text[text.index(header):]
    table = table[:table.index("\n\n")]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows[cells[1] if header.startswith("| layer") else cells[0].strip("`/")] = cells
    return rows


def architecture_rows() -> dict[str, list[str]]:
    return table_rows((ROOT / "docs" / "architecture.md").read_text(), "| layer | part |")


def packages() -> set[str]:
    return {path.parent.name for path in PACKAGE.glob("*/__init__.py")}


def kernel_modules() -> set[str]:
    return {path.name for path in PACKAGE.glob("*.py") if path.name != "__init__.py"}


def named_paths(cell: str) -> list[str]:
    return PATH_NAME.findall(cell)


def exists(part: str, name: str) -> bool:
    """A name in a part's row: a kernel module at the top of robot_memory/; else a file
    or folder in the part's folder (or below it), or a folder at the top (`config/`)."""
    if part == KERNEL:
        return (PACKAGE / name).is_file()
    if name.endswith("/"):
        return (PACKAGE / part / name).is_dir() or (PACKAGE / name).is_dir()
    return any((PACKAGE / part).rglob(name))


def test_one_row_per_package_and_one_for_the_kernel():
    assert set(architecture_rows()) == packages() | {KERNEL}


def test_the_kernel_row_names_every_module_at_the_top():
    named = set(named_paths(architecture_rows()[KERNEL][2]))
    assert named == kernel_modules()


def test_each_package_row_names_its_folder_first():
    for part, cells in architecture_rows().items():
        if part != KERNEL:
            assert cells[2].startswith(f"`{part}/`"), part


def test_every_module_or_folder_the_table_names_exists():
    missing = [f"{part}: {name}" for part, cells in architecture_rows().items()
               for name in named_paths(cells[2]) if not exists(part, name)]
    assert missing == []


def test_developing_maps_every_part():
    rows = table_rows((ROOT / "DEVELOPING.md").read_text(), "| part |")
    assert set(rows) == packages() | {KERNEL}


def test_a_missing_name_is_found():
    assert exists("store", "log.py") and exists("ros", "rclpy_internals.py")
    assert exists("operation", "config/") and exists("sim", "transfer*.py")
    assert not exists("store", "no_such_module.py") and not exists(KERNEL, "log.py")

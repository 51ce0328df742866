"""The hand-written CDR codecs (robot_memory/wire/) against the .msg files: each codec
declares the fields it encodes, in order, and these tests fail, naming the codec module
and the field, when a .msg file adds, removes, renames, retypes or reorders one. A nested
message type a codec encodes (KeyValue, builtin_interfaces/Time, std_msgs/Header) must
have its layout declared too, and each of robot_memory's .msg files that a codec encodes
points to it in a comment."""

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import robot_memory.wire
from robot_memory.wire.cdr import Layout
from robot_memory.wire.msg_files import PRIMITIVES, msg_fields, msg_file, our_msg_dir

ROOT = Path(__file__).resolve().parents[2]


def declared_layouts() -> dict[str, tuple[str, Layout]]:
    """Message type -> (the codec module's path, its layout), from every module of wire/."""
    found: dict[str, tuple[str, Layout]] = {}
    for info in pkgutil.iter_modules(robot_memory.wire.__path__, "robot_memory.wire."):
        module = importlib.import_module(info.name)
        where = str(Path(module.__file__).relative_to(ROOT))
        for layout in getattr(module, "LAYOUTS", ()):
            assert layout.type_name not in found, (
                f"{layout.type_name} has two codecs: {found[layout.type_name][0]}, {where}")
            found[layout.type_name] = (where, layout)
    return found


LAYOUTS = declared_layouts()


def differences(where: str, layout: Layout, fields: tuple) -> list[str]:
    """What differs between a codec's layout and the .msg file's fields, each naming the
    codec module and the field."""
    declared, actual = list(layout.fields), list(fields)
    names, actual_names = [n for n, _ in declared], [n for n, _ in actual]
    out = []
    for name, type_ in actual:
        if name not in names:
            out.append(f"{where}: {layout.type_name} has a field `{type_} {name}` "
                       "the codec does not encode (added or renamed)")
    for name, type_ in declared:
        if name not in actual_names:
            out.append(f"{where}: encodes `{type_} {name}`, which {layout.type_name} "
                       "no longer has (removed or renamed)")
        elif dict(actual)[name] != type_:
            out.append(f"{where}: encodes `{name}` of {layout.type_name} as {type_}, the "
                       f".msg file says {dict(actual)[name]} (retyped)")
    if not out and names != actual_names:
        moved = next(d for d, a in zip(names, actual_names) if d != a)
        out.append(f"{where}: encodes the fields of {layout.type_name} in another order "
                   f"than the .msg file, from `{moved}` on (reordered): {actual_names}")
    return out


def message_types(fields) -> set[str]:
    return {type_.split("[", 1)[0] for _, type_ in fields} - PRIMITIVES


@pytest.mark.parametrize("type_name", sorted(LAYOUTS))
def test_each_codec_encodes_the_fields_of_its_msg_file(type_name):
    where, layout = LAYOUTS[type_name]
    path = msg_file(type_name)
    assert path is not None, (f"{where} encodes {type_name}: no .msg file found (robot_memory's "
                              "msg/, or share/<package>/msg/ on AMENT_PREFIX_PATH)")
    fields = msg_fields(path.read_text(), type_name.split("/")[0])
    assert differences(where, layout, fields) == [], path


def test_every_message_type_a_codec_nests_has_a_declared_layout():
    for type_name, (where, layout) in LAYOUTS.items():
        for nested in message_types(layout.fields):
            assert nested in LAYOUTS, (f"{where}: {type_name} nests {nested}, whose layout "
                                       "no module of robot_memory/wire/ declares")


def test_the_codecs_cover_the_hot_path_messages():
    assert {"robot_memory/ExecutionResult", "robot_memory/SemanticFact",
            "robot_memory/SemanticFactArray", "robot_memory/KeyValue"} <= set(LAYOUTS)


@pytest.mark.parametrize("type_name", sorted(t for t in LAYOUTS if t.startswith("robot_memory/")))
def test_each_msg_file_a_codec_encodes_points_to_it(type_name):
    where, _ = LAYOUTS[type_name]
    path = our_msg_dir() / f"{type_name.split('/')[1]}.msg"
    comments = [line for line in path.read_text().splitlines() if line.startswith("#")]
    assert any(where in line for line in comments), (
        f"msg/{path.name} has no comment naming {where}, the codec that encodes it")


# The test above, held to fail as it should: each kind of change to a .msg file is named.
SEMANTIC_FACT = (ROOT / "msg" / "SemanticFact.msg").read_text()
CHANGES = {
    "added": (("float64 confidence", "float64 confidence\nfloat64 spread"), "`float64 spread`"),
    "removed": (("uint64 n_observations\n", ""), "`uint64 n_observations`"),
    "renamed": (("string rule_version", "string rules_version"), "rules_version"),
    "retyped": (("float64 confidence", "float32 confidence"), "`confidence`"),
    "reordered": (("float64 confidence\nuint64 n_observations",
                   "uint64 n_observations\nfloat64 confidence"), "from `confidence` on"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_changed_field_fails_naming_the_codec_and_the_field(change):
    (old, new), named = CHANGES[change]
    assert old in SEMANTIC_FACT, change
    where, layout = LAYOUTS["robot_memory/SemanticFact"]
    found = differences(where, layout, msg_fields(SEMANTIC_FACT.replace(old, new),
                                                  "robot_memory"))
    assert found and all(where in d for d in found), found
    assert any(named in d and change in d for d in found), found


def test_msg_fields_reads_what_a_msg_file_may_hold():
    text = ("# a comment\nint32 LIMIT = 5\nstring NAME=x  # a constant\n"
            "string<=8[<=3] names  # bounded\nHeader header\nKeyValue[] pairs\n"
            "builtin_interfaces/msg/Time[2] stamps\nstring note \"a=b\"\n")
    assert msg_fields(text, "robot_memory") == (
        ("names", "string<=8[<=3]"), ("header", "std_msgs/Header"),
        ("pairs", "robot_memory/KeyValue[]"), ("stamps", "builtin_interfaces/Time[2]"),
        ("note", "string"))


def test_the_codecs_import_no_store_nor_any_part_above_them():
    """wire/ takes a fact row through a protocol and a factory, and is told which of a
    value's fields to serve: it imports nothing of the store, the consolidation, the
    grounding or the nodes."""
    above = ("robot_memory.store", "robot_memory.consolidation", "robot_memory.grounding",
             "robot_memory.ros", "robot_memory.retention", "robot_memory.operation")
    for path in sorted((ROOT / "robot_memory" / "wire").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                assert not name.startswith(above), f"{path.relative_to(ROOT)} imports {name}"

"""The README is the interface document: it must name every parameter, node and verb."""

from pathlib import Path

from robot_memory.cli import build_parser
from robot_memory.parameters import node_names, node_parameters

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_readme_documents_every_node_and_parameter():
    for node in node_names():
        assert f"### {node}" in README
        for name in node_parameters(node):
            assert f"`{name}`" in README, name


def test_readme_documents_every_cli_verb_and_the_two_commands():
    verbs = build_parser()._subparsers._group_actions[0].choices
    for verb in verbs:
        assert f"robot-memory {verb}" in README, verb
    assert "make run" in README and "make test" in README


def test_readme_documents_every_interface():
    root = Path(__file__).resolve().parents[2]
    for path in sorted((root / "msg").glob("*.msg")) + sorted((root / "srv").glob("*.srv")):
        assert f"`{path.parent.name}/{path.stem}`" in README, path.name

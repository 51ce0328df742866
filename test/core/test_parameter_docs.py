"""docs/parameters.md is generated from operation/parameters.yaml and must be current."""

from pathlib import Path

from robot_memory.operation.parameters import main, markdown, node_names, node_parameters

DOC = Path(__file__).resolve().parents[2] / "docs" / "parameters.md"
REGENERATE = "python -m robot_memory.operation.parameters --markdown docs/parameters.md"


def test_parameter_docs_are_current():
    assert DOC.read_text(encoding="utf-8") == markdown(), (
        f"docs/parameters.md is stale: regenerate it with `{REGENERATE}` and commit it")


def test_every_parameter_has_a_row_with_its_default_and_range():
    text = markdown()
    for node in node_names():
        for name, spec in node_parameters(node).items():
            row = next(line for line in text.splitlines() if line.startswith(f"| `{name}` |"))
            assert spec.type in row and spec.description.replace("|", "&#124;") in row
            if spec.min is not None:
                assert f"{spec.min} .." in row


def test_the_command_writes_the_file(tmp_path):
    out = tmp_path / "parameters.md"
    assert main(["--markdown", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == markdown()

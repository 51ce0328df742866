"""docs/cli.md's reference part is generated from the parser and must be current."""

from pathlib import Path

from robot_memory.cli.reference import REFERENCE_HEADING, REGENERATE, main, with_reference

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_the_verbs_help_in_the_docs_is_current():
    page = DOC.read_text(encoding="utf-8")
    assert page == with_reference(page), (
        f"docs/cli.md's reference part is stale: regenerate it with `{REGENERATE}` and "
        "commit it")


def test_every_verb_and_nested_verb_has_its_help():
    reference = DOC.read_text(encoding="utf-8").split(REFERENCE_HEADING, 1)[1]
    for verb in ("ingest", "import-bag", "verify", "override fact", "override reset",
                 "db init", "db add-priors-reader", "bringup", "report"):
        assert f"### `robot-memory {verb}`" in reference, verb
    assert "exit codes:" in reference  # the top-level help, with its epilog


def test_the_command_keeps_the_hand_written_part(tmp_path):
    out = tmp_path / "cli.md"
    out.write_text("# by hand\n\nintro\n\n" + REFERENCE_HEADING + "\n\nstale\n",
                   encoding="utf-8")
    assert main(["--markdown", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# by hand\n\nintro\n\n" + REFERENCE_HEADING)
    assert "stale" not in text and "### `robot-memory ingest`" in text

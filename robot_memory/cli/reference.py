"""docs/cli.md's reference part: every verb's `--help`, rendered from the parser.

The page's first part is written by hand (what the verbs are for, the exit codes);
everything after REFERENCE_HEADING is this module's output, and a test holds it to the
parser, as docs/parameters.md is held to parameters.yaml.

    python -m robot_memory.cli.reference --markdown docs/cli.md
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from robot_memory.cli.parser import build_parser

REFERENCE_HEADING = "## Every verb's --help"
REGENERATE = "python -m robot_memory.cli.reference --markdown docs/cli.md"
HELP_COLUMNS = "100"  # argparse wraps help to the terminal: a fixed width, the same page


@contextmanager
def _fixed_width() -> Iterator[None]:
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Each verb's parser, nested ones (`override fact`, `db init`) after their group."""
    verbs = getattr(parser, "verbs", None)
    for sub in (verbs.choices.values() if verbs is not None else ()):
        yield sub
        yield from _parsers(sub)


def reference() -> str:
    """The generated part of docs/cli.md, from its heading to the end."""
    lines = [REFERENCE_HEADING, "",
             f"Generated from the parser: regenerate with `{REGENERATE}`.", ""]
    with _fixed_width():
        parser = build_parser()
        for sub in (parser, *_parsers(parser)):
            lines += [f"### `{sub.prog}`", "", "```text", sub.format_help().rstrip(), "```",
                      ""]
    return "\n".join(lines)


def with_reference(page: str) -> str:
    """`page` (docs/cli.md) with its reference part rendered anew."""
    hand_written = page.split(REFERENCE_HEADING, 1)[0].rstrip()
    return f"{hand_written}\n\n{reference()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--markdown", type=Path, required=True,
                        help="docs/cli.md: its reference part is written anew")
    args = parser.parse_args(argv)
    args.markdown.write_text(with_reference(args.markdown.read_text(encoding="utf-8")),
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The commands the README and docs/ give to paste run clean: none ends a pipe early
under `ros2 topic echo` (`grep -m1`, `head`, `grep -q` close the pipe while echo still
writes, and it dies with a BrokenPipeError traceback); `--once` takes one message."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EARLY_EXIT = re.compile(r"\|\s*(grep\s+[^|]*(-m\s*\d+|-q\b|--max-count)|head\b)")


def commands():
    """Every line of every bash block, continuation lines joined."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        block, lines = None, []
        for line in page.read_text().splitlines():
            if line.startswith("```"):
                if block == "bash":
                    yield from ((page.name, c) for c in "\n".join(lines)
                                .replace("\\\n", " ").splitlines())
                block, lines = (line[3:].strip() or "bash") if block is None else None, []
            elif block is not None:
                lines.append(line)


def test_no_topic_echo_is_cut_off_by_its_pipe():
    echoes = [(page, line) for page, line in commands() if "ros2 topic echo" in line]
    assert echoes, "no ros2 topic echo in the docs: this test looks in the wrong place"
    for page, line in echoes:
        assert not EARLY_EXIT.search(line), f"{page}: {line.strip()}"

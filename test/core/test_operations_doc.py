"""docs/operations.md covers every identity state and every /diagnostics WARN/ERROR the
nodes can publish, and names only verbs that exist."""

import re
from pathlib import Path

from robot_memory.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")


def test_every_identity_state_has_a_row():
    states = re.findall(r"^uint8 ([A-Z_]+)=\d+$",
                        (ROOT / "msg" / "IdentityStatus.msg").read_text(), re.MULTILINE)
    assert len(states) >= 5
    for state in states:
        assert f"| `{state}` |" in DOC, state


def test_every_warn_and_error_message_of_the_nodes_is_explained():
    # The fixed words of each `level, message = WARN|ERROR, ...` in the nodes and in the
    # core services that decide a node's diagnostics (the consolidator's pass policy).
    found = 0
    package = ROOT / "robot_memory"
    for path in sorted(package.glob("ros/*.py")) + [package / "consolidation" / "service.py"]:
        source = path.read_text(encoding="utf-8")
        for match in re.finditer(r"(?:level, message =|return) (?:WARN|ERROR), \(?f?\"([^\"{]+)",
                                 source):
            words = match.group(1).strip().rstrip(":")
            assert words in DOC, f"{path.name}: {words!r} not in docs/operations.md"
            found += 1
    assert found >= 5
    for words in ("above the growth limit", "at or above the hard limit",
                  "consultation audit records overflowed", "refusing to write or serve",
                  "unheard publishers:"):
        assert words in DOC, words


def test_commands_in_the_runbook_exist():
    verbs = build_parser()._subparsers._group_actions[0].choices
    later = {"keygen", "checkpoint", "migrate"}  # verbs of the signed-checkpoint and schema work
    for verb in set(re.findall(r"robot-memory ([a-z]+(?:-[a-z]+)*)", DOC)):
        assert verb in verbs or verb in later, verb
    assert "Never edit the store" in DOC or "never edit" in DOC.lower()

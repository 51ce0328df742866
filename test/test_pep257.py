"""ament's pep257 check of the package's docstrings, as `ros2 pkg create` sets it up for
an ament_python package: ament's default ignore list, plus the forms this code base
writes on purpose."""

from pathlib import Path

import pytest
from ament_pep257.main import main

ROOT = Path(__file__).resolve().parents[1]

# Beyond ament's list (D100-D107, D203, D212, D404): a summary may run over several lines
# and end without a period before the rest (D205, D400, D415); the closing quotes end the
# last line of text (D209), which the summary may start on the quotes' line (D213 wants
# the second; ament ignores only D212, the opposite); summaries are descriptive, not
# imperative (D401); a docstring may begin with the call it documents or with a name
# written in lower case, `seq`, `n`, `SQLite's` (D402, D403).
THIS_CODE_BASE = ["D205", "D209", "D213", "D400", "D401", "D402", "D403", "D415"]


@pytest.mark.linter
@pytest.mark.pep257
def test_pep257(monkeypatch):
    monkeypatch.chdir(ROOT)
    rc = main(argv=[".", "--add-ignore", *THIS_CODE_BASE])
    assert rc == 0, "Found code style errors / warnings"

"""ament's flake8 check of the package's Python code, as `ros2 pkg create` sets it up for
an ament_python package, with this code base's settings (setup.cfg's [flake8])."""

from pathlib import Path

import pytest
from ament_flake8.main import main_with_errors

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.flake8
@pytest.mark.linter
def test_flake8(monkeypatch):
    monkeypatch.chdir(ROOT)  # ament checks the package it runs in, as colcon test does
    rc, errors = main_with_errors(argv=["--config", str(ROOT / "setup.cfg")])
    assert rc == 0, \
        "Found %d code style errors / warnings:\n" % len(errors) + "\n".join(errors)

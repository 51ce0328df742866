"""The report and an evidence bundle of the `make run` store (the demo's real nodes)."""

import subprocess
import sys

import pytest
from report_html import SECTIONS, ReportParser

pytestmark = pytest.mark.ros


def cli(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "robot_memory.cli", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_report_and_bundle_of_the_make_run_store(tmp_path, certified_hash):
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    demo = cli("demo", "--db", url)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    out = tmp_path / "report.html"
    made = cli("report", "--out", str(out), "--db", url, "--identity", certified_hash)
    assert made.returncode == 0, made.stderr
    parser = ReportParser()
    parser.feed(out.read_text(encoding="utf-8"))
    assert SECTIONS <= parser.sections and parser.fetching == []
    sections = {f["attrs"]["data-section"] for f in parser.figures}
    assert sections == {"rates", "parameters", "zones", "consultations"}
    rate = next(f for f in parser.figures if f["attrs"]["data-section"] == "rates")
    # Rules v2.0: the skill fact describes its recommended band (12 of 12 at 25 N), not
    # the 16 grasps at every force (12 of 16).
    assert rate["numbers"]["n"] == 12 and rate["numbers"]["rate"] == 1.0
    exported = cli("export", "--out", str(tmp_path / "bundle"), "--db", url, "--identity",
                   certified_hash)
    assert exported.returncode == 0, exported.stderr
    verified = cli("verify-bundle", str(tmp_path / "bundle"))
    assert verified.returncode == 0 and "byte-equal" in verified.stdout, verified.stderr

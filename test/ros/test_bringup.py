"""`robot-memory bringup` and `robot-memory demo` as a user runs them."""

import os
import signal
import subprocess
import sys

from robot_memory.msg import IdentityStatus


def test_bringup_starts_verifies_and_stops_on_sigint(probe, namespace, manifest_file,
                                                     certified_hash, db_url, tmp_path):
    log = open(tmp_path / "bringup.log", "wb")
    temp = tmp_path / "tmp"  # where the parameters file goes while the nodes run
    temp.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "robot_memory.cli", "bringup", "--manifest", str(manifest_file),
         "--certified-hash", certified_hash, "--db", db_url, "--namespace", namespace,
         "--param", "period_s=0.5"], stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "TMPDIR": str(temp)})
    try:
        assert probe.wait_identity().state == IdentityStatus.VERIFIED
        assert probe.grounding.wait_for_service(30)
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        log.close()
    output = (tmp_path / "bringup.log").read_text()
    assert "started manifest_verifier, episodic_logger, consolidator, grounding_server" in output
    assert list(temp.iterdir()) == []  # no parameters file left behind


def test_demo_runs_the_seed_example_and_exits_zero():
    result = subprocess.run([sys.executable, "-m", "robot_memory.cli", "demo"],
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "planner asks before any experience: ABSTAIN (no_fact" in out
    assert "recommended_force_n = 25" in out
    assert "identity hash byte-equal before and after: True" in out

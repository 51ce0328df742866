"""The closed loop in MuJoCo, short: the same episodes with and without memory, run as
a real process (simulator, skill and planner nodes plus the four memory nodes)."""

import json
import sys

from helpers import run_in_own_group


def test_memory_reduces_unproductive_attempts_in_the_physics_loop(tmp_path):
    run = run_in_own_group([sys.executable, "-m", "robot_memory.sim", "--only", "closed_loop",
                            "--decisions", "60", "--block", "20", "--out", str(tmp_path)],
                           timeout=170)
    print(run.stdout[-3000:], run.stderr[-3000:])
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads((tmp_path / "sim_closed_loop.json").read_text())
    effect = result["effect"]
    print(f"effect: reduction {effect['reduction']:.1%}, 95% CI {effect['ci95']} "
          f"({effect['unproductive_without']} -> {effect['unproductive_with']} unproductive)")
    assert effect["unproductive_with"] < effect["unproductive_without"]
    assert effect["ci95"][0] <= effect["ci95"][1]
    actions = {step["action"] for step in result["steps_with_memory"]}
    assert "exploit" in actions  # memory answered and the planner used its force
    assert len(result["blocks_with_memory"]) == len(result["blocks_without_memory"]) == 3
    assert (tmp_path / "sim_closed_loop.png").stat().st_size > 0

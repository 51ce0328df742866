"""The transfer experiments in MuJoCo, tiny: a robot learns the closed loop's objects, then
held-out objects appear, run with and without analogies from copies of its store, and a
second robot joins with and without the first one's facts as priors (real node
processes). Checks the shape of sim_transfer.json, and that ANALOGY and PRIOR answers
were served and borrowed, never taken for the robot's own knowledge."""

import json
import sys

from helpers import run_in_own_group


def test_transfer_experiment_serves_analogies_and_reports_paired_effects(tmp_path):
    run = run_in_own_group([sys.executable, "-m", "robot_memory.sim", "--only", "transfer",
                            "--learn", "40", "--held-out", "3", "--misleading", "3",
                            "--held-out-block", "3", "--joiner", "6", "--out", str(tmp_path)],
                           timeout=360)
    print(run.stdout[-3000:], run.stderr[-3000:])
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads((tmp_path / "sim_transfer.json").read_text())
    assert not (tmp_path / "sim_closed_loop.json").exists()  # --only transfer
    assert set(result["learning"]["facts"]) >= {"glass_cup", "heavy_mug"}
    for part in ("experiments", "misleading"):
        block = result[part]["analogies"]
        effect = block["effect"]
        assert len(block["steps_with"]) == len(block["steps_without"]) == block["episodes"]
        assert [s["episode"] for s in block["steps_with"]] == \
            [s["episode"] for s in block["steps_without"]]  # paired: the same episodes
        assert effect["unproductive_without"] == sum(
            s["action"] != "skip" and not s["success"] for s in block["steps_without"])
        assert "reduction" in effect and "ci95" in effect and "saved_per_episode" in effect
        without, with_ = block["steps_without"], block["steps_with"]
        # Without analogies nothing is ever lent; with them, an ANALOGY answer's force is
        # borrowed, never exploited or skipped.
        assert all(s["status"] != "ANALOGY" and s["action"] != "borrow" for s in without)
        assert block["analogy_answers_with"] > 0
        for step in with_:
            if step["status"] == "ANALOGY":
                assert step["action"] in ("borrow", "explore") and step["measured_mass_kg"] > 0
                assert step["action"] != "borrow" or step["lent_from"] in ("glass_cup",
                                                                           "heavy_mug")
        for target, arms in block["per_object"].items():
            first = next(s for s in with_ if s["target"] == target)
            assert first["status"] in ("ANALOGY", "ABSTAIN"), target  # never its own yet
            assert not arms["with"]["analogy_after_own_fact"]
    assert result["misleading"]["analogies"]["objects"].keys() == {"crystal_glass"}
    first_robot = "demo-arm-01"
    for part in ("experiments", "misleading"):
        block = result[part]["priors"]
        assert [s["episode"] for s in block["steps_with"]] == \
            [s["episode"] for s in block["steps_without"]]
        assert all(s["status"] != "PRIOR" for s in block["steps_without"])
        assert block["prior_answers_with"] > 0
        for step in block["steps_with"]:
            if step["status"] == "PRIOR":
                assert step["action"] in ("borrow", "explore", "skip")
                assert step["action"] != "borrow" or step["lent_from"] == first_robot
        for arms in block["per_object"].values():
            assert not arms["with"]["prior_after_own_fact"]
    misled = result["misleading"]["priors"]
    assert misled["physics_of"] == {"glass_cup": "crystal_glass"}
    assert misled["objects"]["glass_cup"]["crack_force_n"] == 18.0
    assert (tmp_path / "sim_transfer.png").stat().st_size > 0

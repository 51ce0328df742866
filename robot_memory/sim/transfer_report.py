"""The transfer experiments' report: paired effects with their CIs, per-object summaries,
the JSON block of each paired run, the figure and the lines printed
(robot_memory/sim/transfer.py runs them)."""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict
from pathlib import Path

import numpy as np
from scipy.stats import bootstrap

from robot_memory.sim.policy import ANALOGY, BORROW, PRIOR
from robot_memory.sim.run_sim import BOOTSTRAP, _say, reduction_with_ci
from robot_memory.sim.scene import ALL_OBJECTS
from robot_memory.sim.transfer_steps import PairedRun, TransferStep


def paired_effect(without: list[TransferStep], with_: list[TransferStep]) -> dict:
    """run_sim's reduction with its paired BCa CI, plus the paired mean difference of
    unproductive attempts per episode (with its own BCa CI), which stays defined when
    one arm has no unproductive attempt at all. A CI scipy cannot compute (every
    resample equal, or a resample with no unproductive attempt without the feature) is
    null, with the reason."""
    effect = reduction_with_ci(without, with_)
    if not all(math.isfinite(v) for v in effect["ci95"]):
        effect["ci95"] = None
        effect["ci_note"] = "BCa undefined for these counts (degenerate resamples)"
    if not math.isfinite(effect["reduction"]):
        effect["reduction"] = None
    a = np.array([s.unproductive for s in without], dtype=float)
    b = np.array([s.unproductive for s in with_], dtype=float)
    difference = {"mean": float(np.mean(a - b)), "ci95": None}
    if np.ptp(a - b) > 0:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ci = bootstrap((a - b,), np.mean, vectorized=True, **BOOTSTRAP).confidence_interval
        if math.isfinite(ci.low) and math.isfinite(ci.high):
            difference["ci95"] = [float(ci.low), float(ci.high)]
    effect["saved_per_episode"] = difference
    return effect


def _first(steps: list[TransferStep], predicate) -> int | None:
    """1-based position of the first step that satisfies `predicate`, or None."""
    return next((i + 1 for i, s in enumerate(steps) if predicate(s)), None)


def target_summary(steps: list[TransferStep]) -> dict:
    return {"episodes": len(steps), "attempts": sum(s.attempted for s in steps),
            "successes": sum(s.success for s in steps),
            "unproductive": sum(s.unproductive for s in steps),
            "skipped": sum(not s.attempted for s in steps),
            "answers": {status: sum(s.status == status for s in steps)
                        for status in sorted({s.status for s in steps})},
            "borrowed_attempts": sum(s.action == BORROW for s in steps),
            "borrowed_unproductive": sum(s.action == BORROW and s.unproductive for s in steps),
            "borrowed_forces_n": sorted({s.force_n for s in steps if s.action == BORROW}),
            "lent_from": sorted({s.lent_from for s in steps if s.lent_from}),
            "episode_of_first_success": _first(steps, lambda s: s.success),
            "episode_own_fact_first_served": _first(steps, lambda s: s.status == "OK"),
            "analogy_after_own_fact": _after_own_fact(steps, ANALOGY),
            "prior_after_own_fact": _after_own_fact(steps, PRIOR)}


def _after_own_fact(steps: list[TransferStep], status: str) -> bool:
    """Whether an answer of `status` came after `ground` first served the own fact."""
    own = _first(steps, lambda s: s.status == "OK") or len(steps) + 1
    return any(s.status == status for s in steps[own - 1:])


def report_run(run: PairedRun) -> dict:
    """The JSON block of one paired run: the effect with its CI, per object, the steps."""
    targets = sorted({e.target for e in run.stream}, key=[e.target for e in run.stream].index)
    per_target = {t: {"without": target_summary([s for s in run.without if s.target == t]),
                      "with": target_summary([s for s in run.with_ if s.target == t])}
                  for t in targets}
    physics_of = run.notes.get("physics_of", {})
    return {"question": run.question, "without": run.without_label, "with": run.with_label,
            "objects": {t: asdict(ALL_OBJECTS[physics_of.get(t, t)]) for t in targets},
            **({"physics_of": physics_of} if physics_of else {}),
            "episodes": len(run.stream),
            "effect": paired_effect(run.without, run.with_),
            "analogy_answers_with": sum(s.status == ANALOGY for s in run.with_),
            "prior_answers_with": sum(s.status == PRIOR for s in run.with_),
            "successes_without": sum(s.success for s in run.without),
            "successes_with": sum(s.success for s in run.with_),
            "per_object": per_target,
            "steps_without": [asdict(s) for s in run.without],
            "steps_with": [asdict(s) for s in run.with_]}


def plot(runs: list[PairedRun], path: Path) -> None:
    """One panel per paired run: cumulative unproductive attempts over its episodes."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(4.6 * len(runs), 3.6), squeeze=False)
    for ax, run in zip(axes[0], runs):
        x = range(1, len(run.stream) + 1)
        for steps, label, style in ((run.without, "without", "o--"), (run.with_, "with", "s-")):
            ax.plot(x, np.cumsum([s.unproductive for s in steps]), style, markersize=3,
                    label=f"{label} {run.key}")
        for boundary in [i for i in range(1, len(run.stream))
                         if run.stream[i].target != run.stream[i - 1].target]:
            ax.axvline(boundary + 0.5, color="grey", linewidth=0.6)
        own = [i + 1 for i, s in enumerate(run.with_) if s.status == "OK" and
               (i == 0 or run.with_[i - 1].status != "OK" or
                run.with_[i - 1].target != s.target)]
        for i, x_own in enumerate(own):
            ax.axvline(x_own, color="tab:orange", linestyle=":", linewidth=1,
                       label="own fact served (with)" if i == 0 else None)
        title = ("misleading: " if run.notes.get("misleading") else "") + \
            ", ".join(dict.fromkeys(e.target for e in run.stream))
        ax.set(xlabel="held-out episode", ylabel="unproductive attempts (cumulative)",
               title=f"{run.key}: {title}")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _ci(ci) -> str:
    return f"95% CI {ci[0]:.1%} to {ci[1]:.1%}" if ci else "CI undefined"


def report(result: dict, out: Path) -> None:
    facts = ", ".join(f"{t}: {f.get('recommended_force_n')} N, {f.get('mass_kg_median')} kg"
                      for t, f in result["learning"]["facts"].items())
    _say(f"[transfer] learned from {result['learning']['episodes']} episodes ({facts})")
    for part in ("experiments", "misleading"):
        for key, block in result[part].items():
            effect = block["effect"]
            reduction = effect["reduction"]
            _say(f"[transfer] {part}/{key}: {block['episodes']} episodes; unproductive "
                 f"attempts {effect['unproductive_without']} without, "
                 f"{effect['unproductive_with']} with: reduction "
                 f"{'n/a' if reduction is None else f'{reduction:.1%}'} "
                 f"({_ci(effect['ci95'])}); {block['analogy_answers_with']} ANALOGY, "
                 f"{block['prior_answers_with']} PRIOR answers")
            for target, arms in block["per_object"].items():
                w, o = arms["with"], arms["without"]
                _say(f"    {target:>14}: unproductive {o['unproductive']} -> "
                     f"{w['unproductive']} ({w['borrowed_unproductive']} of "
                     f"{w['borrowed_attempts']} borrowed attempts failed); first success at "
                     f"episode {o['episode_of_first_success']} -> "
                     f"{w['episode_of_first_success']}; own fact served from episode "
                     f"{w['episode_own_fact_first_served']}")
    _say(f"[transfer] wrote {out / 'sim_transfer.json'} and {out / 'sim_transfer.png'} in "
         f"{result['runtime_s']} s ({result['timings_s']})")

"""The validation of "Episodic-to-Semantic Consolidation Without Identity Drift" (V1, V2,
V3 with Tables 1-4, Figure 5; Table 5 read from bench/results/consolidation_pass.json),
every number produced by robot_memory's own store, consolidation pass and grounding index.

    python -m bench.paper            # writes bench/results/paper.json, paper.md,
                                     # paper_figure5.png

Choices where the paper leaves the V3 scene open (fixed here, documented in paper.md):
- History per seed: 200 glass_cup attempts drawn Bernoulli(0.8) and 50 unknown_object
  attempts drawn Bernoulli(0.2). The first 80% of each object's history is logged and
  consolidated into the robot's store; the last 20% is the held-out slice that only the
  calibrated control reads (10 outcomes for unknown_object, as the paper's Table 3 note).
- Decisions: each of the N decisions picks glass_cup or unknown_object with probability
  1/2 and carries a pre-drawn outcome (true rates 0.8 and 0.2). All four controls face
  the SAME decisions and outcomes (a paired design), so a control that attempts
  everything is exactly no_memory.
- A grounded planner asks the grounding index (kind skill_success_rate) before each
  decision. It attempts when memory abstains (no fact: explore), otherwise only when its
  score >= threshold. Scores: raw = the fact's success rate; uniform = 1.0; calibrated =
  the shrunk rate (prior mean 0.5, weight 10) that the consolidation pass renders for the
  held-out slice, consolidated in a store of its own with that prior.
- Unproductive attempt = an attempt that fails. Reduction per seed = 1 - unproductive
  (control) / unproductive (no_memory); the mean over seeds and its BCa bootstrap CI.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import bootstrap

from robot_memory.consolidation import EXECUTION_RESULT, RulesConfig, consolidation_pass
from robot_memory.consolidation import facts_snapshot
from robot_memory.grounding.index import OK, GroundingIndex, GroundingRequest
from robot_memory.manifest import load_manifest
from robot_memory.store import MemoryStore, NewEvent

RESULTS = Path(__file__).resolve().parent / "results"
EXAMPLE_MANIFEST = (Path(__file__).resolve().parent.parent / "robot_memory" / "config"
                    / "example_manifest.yaml")

SEEDS = (20260506, 20260507, 20260513, 20260517, 20260519, 20260523, 20260529, 20260531,
         20260601, 20260607)
N_DECISIONS = 1000
BOOTSTRAP = {"n_resamples": 10000, "random_state": 20260524, "method": "BCa",
             "confidence_level": 0.95}
THRESHOLD = 0.5
# The paper's tables were made with the rules v1.0 (kept by version for this).
PAPER_RULE_VERSION = "v1.0"
PAPER_RULES = RulesConfig(rule_version=PAPER_RULE_VERSION)
PRIOR_MEAN, PRIOR_WEIGHT = 0.5, 10.0
HOLDOUT_SHARE = 0.2
CONTROLS = ("no_memory", "uniform", "raw", "calibrated")

SKILL, ENVIRONMENT = "manipulation.grasp", "sim_relaxed"
OBJECTS = {"glass_cup": (200, 0.8), "unknown_object": (50, 0.2)}  # history rows, true rate
# Stamps one second apart from the start of an hour: every event of a history falls in
# one time bucket, so decay weights are exactly 1 (the paper's counts are undecayed).
T0_NS = 3600 * 10**9 * 490_000

# The paper's published numbers (Tables 1-5, V1, V2).
PAPER = {
    "table1": {"no_memory": {"attempts": 1000.0, "unproductive": 497.5, "rate": 0.498},
               "uniform": {"attempts": 1000.0, "unproductive": 510.2, "rate": 0.510,
                           "reduction": -0.026, "ci": [-0.047, 0.004]},
               "raw": {"attempts": 544.4, "unproductive": 109.7, "rate": 0.201,
                       "reduction": 0.7982, "ci": [0.7802, 0.8149]},
               "calibrated": {"attempts": 544.4, "unproductive": 109.7, "rate": 0.201,
                              "reduction": 0.7982, "ci": [0.7802, 0.8149]}},
    "table2": {"0.3": (-0.026, [-0.047, 0.004]), "0.4": (0.550, [0.283, 0.730]),
               "0.5": (0.7982, [0.780, 0.815]), "0.6": (0.7982, [0.780, 0.815]),
               "0.7": (0.816, [0.788, 0.883])},
    "table3": {"0.3": {"5": 0.7982, "10": 0.7982, "20": 0.7982},
               "0.5": {"5": 0.7982, "10": 0.7982, "20": 0.7982},
               "0.7": {"5": 0.637, "10": 0.550, "20": -0.026}},
    "table4": {"100": (0.804, [0.752, 0.849]), "500": (0.799, [0.779, 0.819]),
               "1000": (0.7982, [0.780, 0.815]), "5000": (0.798, [0.794, 0.803]),
               "10000": (0.799, [0.794, 0.803])},
    "table5": {"latency_median_ms": {"100": 39.9, "1000": 38.8, "10000": 67.9, "100000": 309.0},
               "latency_p90_ms": {"100": 46.9, "1000": 42.0, "10000": 74.8, "100000": 324.5},
               "facts_after_pass": 2, "query_p50_ms": 0.003, "query_p99_ms": 0.004,
               "rss_baseline_mb": 60, "rss_peak_mb": 75},
    "v1": {"checks_passed": 6, "checks": 6, "value": {"n": 1000, "success": 800, "rate": 0.8}},
    "v2": {"hash_prefix": "5f6c5afc6b3924ba4a328138",
           "mutated_hash_prefix": "c778ffffc51d1346bb014770"},
}
TABLE2_THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)
TABLE3_MEANS, TABLE3_WEIGHTS = (0.3, 0.5, 0.7), (5.0, 10.0, 20.0)
TABLE4_NS = (100, 500, 1000, 5000, 10000)


def _say(text: str) -> None:
    print(text, flush=True)


def _result(skill: str, target: str, success: bool) -> dict:
    payload = {"skill_id": skill, "success": success, "environment": ENVIRONMENT}
    if target:
        payload["target_class"] = target
    if not success:
        payload["failure_reason"] = "slipped"
    return payload


def _stamped(payloads: list[dict]) -> list[NewEvent]:
    return [NewEvent(EXECUTION_RESULT, payload, T0_NS + i * 10**9)
            for i, payload in enumerate(payloads)]


def _append_results(partition, payloads: list[dict]) -> None:
    partition.append_many(_stamped(payloads))


def _open(workdir: Path, name: str) -> MemoryStore:
    return MemoryStore(f"sqlite:///{workdir / name}.db")


# -- V1 ---------------------------------------------------------------------------------
def v1(workdir: Path) -> dict:
    """1000 results (800 success): one pass gives one skill_success_rate fact with the
    paper's values; a second pass changes nothing; shuffled insertion, same snapshot."""
    ident = "1" * 64
    rows = _stamped([{"skill_id": SKILL, "success": i < 800} for i in range(1000)])
    store = _open(workdir, "v1")
    partition = store.partition(ident)
    partition.append_many(rows)
    first = consolidation_pass(partition, PAPER_RULES)
    snapshot_1 = facts_snapshot(partition)
    rates = [f for f in partition.facts() if f.kind == "skill_success_rate"]
    second = consolidation_pass(partition, PAPER_RULES)
    snapshot_2 = facts_snapshot(partition)

    shuffled = list(rows)  # the same events (stamps included), inserted in another order
    np.random.default_rng(20260506).shuffle(shuffled)
    other = _open(workdir, "v1_shuffled").partition(ident)
    other.append_many(shuffled)
    consolidation_pass(other, PAPER_RULES)
    snapshot_shuffled = facts_snapshot(other)

    fact = rates[0] if len(rates) == 1 else None
    value = fact.value if fact else {}
    checks = {
        "one_skill_success_rate_row": len(rates) == 1,
        "n_is_1000": value.get("n") == 1000,
        "successes_is_800": value.get("successes") == 800,
        "rate_is_0.8": value.get("rate") == 0.8,
        "n_observations_is_1000": bool(fact) and fact.n_observations == 1000,
        "rule_version_recorded": bool(fact) and value.get("rule_version") == fact.rule_version,
    }
    last_event_id = max(e.id for e in partition.events([EXECUTION_RESULT]))
    return {
        "checks": checks, "checks_passed": sum(checks.values()), "checks_total": len(checks),
        "value": {k: value.get(k) for k in ("n", "successes", "rate")},
        "n_observations": fact.n_observations if fact else None,
        "last_supporting_event_id_is_last_event": bool(fact)
        and fact.last_supporting_event_id == last_event_id,
        "semantic_rows_total": len(partition.facts()),
        "semantic_rows_by_kind": sorted(f.kind for f in partition.facts()),
        "first_pass_facts_touched": first.facts_touched,
        "idempotent": second.facts_touched == 0 and snapshot_1 == snapshot_2,
        "second_pass_facts_touched": second.facts_touched,
        "order_invariant": snapshot_shuffled == snapshot_1,
        "all_pass": all(checks.values()) and second.facts_touched == 0
        and snapshot_1 == snapshot_2 and snapshot_shuffled == snapshot_1,
    }


# -- V2 ---------------------------------------------------------------------------------
def v2(workdir: Path) -> dict:
    """The manifest hash is byte-equal across passes; mutating one manifest field (the
    capability registry hash, the paper's ecm_registry_hash) flips it."""
    manifest = load_manifest(EXAMPLE_MANIFEST)
    before = manifest.identity_hash()
    partition = _open(workdir, "v2").partition(before)
    _append_results(partition, [{"skill_id": SKILL, "success": i % 5 != 0, "target_class":
                                 "glass_cup", "environment": ENVIRONMENT} for i in range(100)])
    consolidation_pass(partition, PAPER_RULES)
    rows = [f.kind for f in partition.facts() if f.kind == "skill_success_rate"]
    after_first = load_manifest(EXAMPLE_MANIFEST).identity_hash()
    second = consolidation_pass(partition, PAPER_RULES)
    after_second = load_manifest(EXAMPLE_MANIFEST).identity_hash()
    registry = manifest.capability_registry_hash
    flipped = ("0" if registry[0] != "0" else "1") + registry[1:]
    mutated = manifest.model_copy(update={"capability_registry_hash": flipped}).identity_hash()
    return {
        "hash_before": before, "hash_after_pass_1": after_first,
        "hash_after_pass_2": after_second, "mutated_field": "capability_registry_hash",
        "mutated_hash": mutated, "skill_success_rate_rows": len(rows),
        "semantic_rows_total": len(partition.facts()),
        "second_pass_facts_touched": second.facts_touched,
        "byte_equal": before == after_first == after_second,
        "mutation_flips_hash": mutated != before,
        "all_pass": before == after_first == after_second and mutated != before
        and len(rows) == 1,
    }


# -- V3 ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class SeedMemory:
    """What one seed's history left in memory: the grounding index over the consolidated
    store, and the held-out outcomes per object (for the calibrated control)."""

    index: GroundingIndex
    holdout: dict[str, list[bool]]


def history(seed: int) -> dict[str, list[bool]]:
    rng = np.random.default_rng([seed, 0])
    return {name: [bool(x) for x in rng.random(count) < rate]
            for name, (count, rate) in OBJECTS.items()}


def decisions(seed: int, n: int) -> list[tuple[str, bool]]:
    """(target, would it succeed) for each decision; the same for every control."""
    rng = np.random.default_rng([seed, 1])
    names = list(OBJECTS)
    picks = rng.integers(0, len(names), n)
    draws = rng.random(n)
    return [(names[p], bool(u < OBJECTS[names[p]][1])) for p, u in zip(picks, draws)]


def seed_memory(seed: int, workdir: Path) -> SeedMemory:
    ident = f"{seed:064d}"
    partition = _open(workdir, f"v3_{seed}").partition(ident)
    logged, holdout = [], {}
    for name, outcomes in history(seed).items():
        cut = len(outcomes) - round(len(outcomes) * HOLDOUT_SHARE)
        logged += [_result(SKILL, name, ok) for ok in outcomes[:cut]]
        holdout[name] = outcomes[cut:]
    _append_results(partition, logged)
    consolidation_pass(partition, PAPER_RULES)
    return SeedMemory(GroundingIndex(ident, partition.facts()), holdout)


def calibrated_rates(seed: int, memory: SeedMemory, workdir: Path, prior_mean: float,
                     prior_weight: float) -> dict[str, float]:
    """The shrunk rate the consolidation pass renders for the held-out slice alone."""
    partition = _open(workdir, f"holdout_{seed}_{prior_mean}_{prior_weight}").partition(
        f"{seed:064d}")
    _append_results(partition, [_result(SKILL, name, ok) for name, outcomes
                                in memory.holdout.items() for ok in outcomes])
    consolidation_pass(partition, RulesConfig(prior_mean=prior_mean, prior_weight=prior_weight,
                                              rule_version=PAPER_RULE_VERSION))
    return {f.value["target_class"]: f.value["shrunk_rate"] for f in partition.facts()
            if f.kind == "skill_success_rate"}


def run_control(control: str, memory: SeedMemory, scene: list[tuple[str, bool]],
                threshold: float, calibrated: dict[str, float]) -> dict:
    attempts = unproductive = skipped_successes = consultations = abstentions = 0
    for decision, (target, would_succeed) in enumerate(scene):
        attempt = True
        if control != "no_memory":
            answer = memory.index.lookup(GroundingRequest(
                SKILL, target, ENVIRONMENT, fact_kinds=("skill_success_rate",)))
            consultations += 1
            if answer.status == OK:
                fact = answer.facts[0]
                score = {"uniform": 1.0, "raw": fact.value["rate"],
                         "calibrated": calibrated.get(target, fact.value["rate"])}[control]
                attempt = score >= threshold
            else:
                abstentions += 1  # memory has nothing to say: explore
        if attempt:
            attempts += 1
            unproductive += not would_succeed
        else:
            skipped_successes += would_succeed
    return {"attempts": attempts, "unproductive": unproductive,
            "rate": unproductive / attempts if attempts else 0.0,
            "skipped_would_have_succeeded": skipped_successes,
            "consultations": consultations, "abstentions": abstentions}


def bca(values: list[float]) -> tuple[float, float, str]:
    """95% BCa bootstrap CI of the mean (the paper's settings); a sample with no spread
    has no bootstrap distribution, so its CI is the point itself (noted)."""
    data = np.asarray(values, dtype=float)
    if np.ptp(data) == 0.0:
        return float(data[0]), float(data[0]), "degenerate: every seed gives the same value"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ci = bootstrap((data,), np.mean, **BOOTSTRAP).confidence_interval
    return float(ci.low), float(ci.high), ""


def summarise(per_seed: list[dict], baseline: list[dict]) -> dict:
    reductions = [1.0 - run["unproductive"] / base["unproductive"]
                  for run, base in zip(per_seed, baseline)]
    low, high, note = bca(reductions)
    out = {key: statistics.fmean(run[key] for run in per_seed)
           for key in ("attempts", "unproductive", "rate", "skipped_would_have_succeeded")}
    out.update(reduction_mean=statistics.fmean(reductions), ci=[low, high],
               per_seed_reduction=reductions)
    if note:
        out["ci_note"] = note
    return out


def sweep(memories: dict[int, SeedMemory], workdir: Path, *, n: int = N_DECISIONS,
          threshold: float = THRESHOLD, prior: tuple[float, float] = (PRIOR_MEAN, PRIOR_WEIGHT),
          controls=CONTROLS, calibration_cache: dict | None = None) -> dict:
    runs = {control: [] for control in controls}
    for seed, memory in memories.items():
        scene = decisions(seed, n)
        key = (seed, prior)
        if calibration_cache is not None and key in calibration_cache:
            rates = calibration_cache[key]
        else:
            rates = calibrated_rates(seed, memory, workdir, *prior)
            if calibration_cache is not None:
                calibration_cache[key] = rates
        for control in controls:
            runs[control].append(run_control(control, memory, scene, threshold, rates))
    baseline = runs.get("no_memory") or [run_control("no_memory", memories[s], decisions(s, n),
                                                     threshold, {}) for s in memories]
    return {control: summarise(runs[control], baseline) for control in controls}


def v3_and_sweeps(workdir: Path) -> dict:
    started = time.perf_counter()
    memories = {seed: seed_memory(seed, workdir) for seed in SEEDS}
    cache: dict = {}
    table1 = sweep(memories, workdir, calibration_cache=cache)
    facts = {seed: {f.key: {"rate": f.value["rate"], "n": f.n_observations,
                            "status": f.status, "confidence": f.confidence}
                    for f in memory.index.facts.values() if f.kind == "skill_success_rate"}
             for seed, memory in memories.items()}
    calibrated = {seed: cache[(seed, (PRIOR_MEAN, PRIOR_WEIGHT))] for seed in SEEDS}
    _say(f"[paper] V3 table 1 done ({time.perf_counter() - started:.1f} s)")
    table2 = {f"{t}": sweep(memories, workdir, threshold=t, controls=("calibrated",),
                            calibration_cache=cache)["calibrated"] for t in TABLE2_THRESHOLDS}
    table3 = {f"{m}": {f"{w:g}": sweep(memories, workdir, prior=(m, w), controls=("calibrated",),
                                       calibration_cache=cache)["calibrated"]
                       for w in TABLE3_WEIGHTS} for m in TABLE3_MEANS}
    table4 = {f"{n}": sweep(memories, workdir, n=n, controls=("calibrated",),
                            calibration_cache=cache)["calibrated"] for n in TABLE4_NS}
    _say(f"[paper] tables 2-4 done ({time.perf_counter() - started:.1f} s)")
    return {"table1": table1, "table2": table2, "table3": table3, "table4": table4,
            "memory_facts_per_seed": facts, "calibrated_rates_per_seed": calibrated}


# -- Table 5 ----------------------------------------------------------------------------
def grounding_lookup_latency(memory: SeedMemory, requests: int = 1000) -> dict:
    """p50/p99 of an in-process GroundingIndex lookup (the paper's Table 5 query row is an
    in-process SQL lower bound; ours is the in-memory index the service answers from)."""
    request = GroundingRequest(SKILL, "glass_cup", ENVIRONMENT)
    times = []
    for _ in range(requests):
        start = time.perf_counter()
        memory.index.lookup(request)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {"requests": requests, "p50_ms": times[len(times) // 2],
            "p99_ms": times[int(len(times) * 0.99) - 1]}


def table5(memory: SeedMemory) -> dict:
    source = RESULTS / "consolidation_pass.json"
    out: dict = {"source": str(source.relative_to(RESULTS.parent.parent))}
    if source.exists():
        data = json.loads(source.read_text())
        out["found"] = True
        out["command"] = data.get("command")
        for name in ("full_pass", "full_pass_seed_shaped", "full_pass_key_space",
                     "incremental", "incremental_seed_shaped"):
            if name in data:
                out[name] = {k: v for k, v in data[name].items() if not isinstance(v, list)}
        for name in ("by_size", "sizes", "per_size", "scaling"):
            if name in data:
                out[name] = data[name]
        # The benchmark's format may change: keep its other top-level figures as they are.
        out["other_figures"] = {k: v for k, v in data.items() if k not in out
                                and isinstance(v, (int, float, dict)) and k != "machine"}
    else:
        out["found"] = False
        out["note"] = "bench/results/consolidation_pass.json is absent: run " \
                      "`python -m bench.consolidation_pass` first"
    out["grounding_lookup"] = grounding_lookup_latency(memory)
    return out


# -- Outputs ----------------------------------------------------------------------------
def _sweep_rows(v3r: dict, table: str) -> list[str]:
    """Rows of a one-parameter sweep (Tables 2 and 4): ours, theirs, difference, CIs."""
    rows = []
    for key, (theirs, theirs_ci) in PAPER[table].items():
        ours = v3r[table][key]
        rows.append(f"| {key} | {_pct(ours['reduction_mean'])} | {_pct(theirs)} | "
                    f"{_diff(ours['reduction_mean'], theirs)} | {_ci(ours['ci'])} | "
                    f"{_ci(theirs_ci)} |")
    return rows


def _checkpoint(figure: dict) -> str:
    """' (+ N ms checkpoint)' where the pass's figure gives the log checkpoint after it."""
    ms = figure.get("checkpoint_after_median_ms")
    return f" (+ {ms} ms checkpoint)" if ms is not None else ""


def _pct(value) -> str:
    return "—" if value is None else f"{value * 100:.2f}%"


def _ci(ci) -> str:
    return "—" if not ci else f"[{ci[0] * 100:.1f}%, {ci[1] * 100:+.1f}%]".replace("+", "")


def _diff(ours, theirs) -> str:
    return "—" if ours is None or theirs is None else f"{(ours - theirs) * 100:+.2f} pp"


def markdown(result: dict) -> str:
    v1r, v2r, v3r = result["v1"], result["v2"], result["v3"]
    lines = ["# Reproducing the validation of \"Episodic-to-Semantic Consolidation Without "
             "Identity Drift\"", "",
             f"Written by `python -m bench.paper` in {result['runtime_s']:.0f} s. Every number "
             "under *ours* comes from robot_memory's store (`MemoryStore`), consolidation pass "
             "(`consolidation_pass`) and grounding index (`GroundingIndex`), run in-process on "
             "SQLite. *Theirs* is the paper's published figure.", "",
             "## V1: deterministic correctness", "",
             "| check | ours | theirs |", "|---|---|---|"]
    for name, passed in v1r["checks"].items():
        lines.append(f"| {name} | {'pass' if passed else 'FAIL'} | pass |")
    lines += [f"| idempotent (2nd pass touches {v1r['second_pass_facts_touched']} facts, "
              "snapshot byte-equal) | " + ("pass" if v1r["idempotent"] else "FAIL") + " | pass |",
              "| order invariant (shuffled insertion, byte-equal snapshot) | "
              + ("pass" if v1r["order_invariant"] else "FAIL") + " | pass |",
              f"| value | n={v1r['value']['n']}, successes={v1r['value']['successes']}, "
              f"rate={v1r['value']['rate']} | n=1000, success=800, rate=0.8 |",
              f"| semantic_facts rows | {v1r['semantic_rows_total']} "
              f"({', '.join(v1r['semantic_rows_by_kind'])}) | 1 |", "",
              "## V2: identity invariance under consolidation", "",
              "| | ours | theirs |", "|---|---|---|",
              f"| hash before | `{v2r['hash_before'][:24]}...` | "
              f"`{PAPER['v2']['hash_prefix']}...` |",
              f"| after pass 1 / pass 2 byte-equal | {v2r['byte_equal']} | True |",
              f"| mutated `{v2r['mutated_field']}` | `{v2r['mutated_hash'][:24]}...` | "
              f"`{PAPER['v2']['mutated_hash_prefix']}...` (ecm_registry_hash) |",
              f"| mutation flips the hash | {v2r['mutation_flips_hash']} | True |", "",
              "The hashes differ from the paper's because the manifests differ (ours is "
              "`robot_memory/config/example_manifest.yaml`); what is reproduced is the "
              "property: byte-equal across passes, flipped by one field.", "",
              "## V3, Table 1: four controls, 10 seeds, N = 1000", "",
              "| control | attempts (ours / theirs) | unproductive (ours / theirs) | "
              "reduction ours | theirs | difference | 95% BCa CI ours | theirs |",
              "|---|---|---|---|---|---|---|---|"]
    for control in CONTROLS:
        ours, theirs = v3r["table1"][control], PAPER["table1"][control]
        reduction = None if control == "no_memory" else ours["reduction_mean"]
        lines.append(
            f"| {control} | {ours['attempts']:.1f} / {theirs['attempts']:.1f} | "
            f"{ours['unproductive']:.1f} / {theirs['unproductive']:.1f} | {_pct(reduction)} | "
            f"{_pct(theirs.get('reduction'))} | {_diff(reduction, theirs.get('reduction'))} | "
            f"{'—' if control == 'no_memory' else _ci(ours['ci'])} | {_ci(theirs.get('ci'))} |")
    lines += ["", "## Table 2: threshold sweep (calibrated)", "",
              "| threshold | ours | theirs | difference | CI ours | CI theirs |",
              "|---|---|---|---|---|---|"]
    lines += _sweep_rows(v3r, "table2")
    lines += ["", "## Table 3: prior sweep (calibrated; mean reduction, ours / theirs)", "",
              "| prior_mean \\ weight | 5 | 10 | 20 |", "|---|---|---|---|"]
    for mean, row in PAPER["table3"].items():
        cells = [f"{_pct(v3r['table3'][mean][w]['reduction_mean'])} / {_pct(row[w])}"
                 for w in ("5", "10", "20")]
        lines.append(f"| {mean} | " + " | ".join(cells) + " |")
    lines += ["", "## Table 4: decisions per seed (calibrated)", "",
              "| N | ours | theirs | difference | CI ours | CI theirs |",
              "|---|---|---|---|---|---|"]
    lines += _sweep_rows(v3r, "table4")
    lines += ["", "## Table 5: runtime overhead", ""]
    t5, p5 = result["table5"], PAPER["table5"]
    lines.append(f"Source: `{t5['source']}` (written by `python -m bench.consolidation_pass`), "
                 "not measured by this script; the grounding lookup row is measured here. "
                 "Passes are timed as the consolidator node runs them; where the file gives "
                 "it, the SQLite log checkpoint the node runs after each pass is shown "
                 "apart (+ checkpoint).")
    lines += ["", "| metric | ours | theirs |", "|---|---|---|"]
    full = t5.get("full_pass_seed_shaped") or t5.get("full_pass")
    if full:
        lines.append(f"| full pass over {full.get('events')} events, median | "
                     f"{full.get('median_ms')} ms{_checkpoint(full)} "
                     f"({full.get('fact_rows', full.get('facts'))} facts) | "
                     f"{p5['latency_median_ms']['100000']} ms (2 facts) |")
    keyed = t5.get("full_pass_key_space") or t5.get("full_pass")
    if keyed:
        lines.append(f"| full pass over {keyed.get('events')} events with "
                     f"{keyed.get('fact_rows', keyed.get('facts'))} facts, median | "
                     f"{keyed.get('median_ms')} ms{_checkpoint(keyed)} | — |")
    if t5.get("incremental"):
        inc = t5["incremental"]
        lines.append(f"| incremental pass (10^3 new on a 10^6 store) | "
                     f"{inc.get('median_ms', inc.get('large_store', {}).get('median_ms'))} ms"
                     f"{_checkpoint(inc)} | — |")
    if t5.get("incremental_seed_shaped"):
        inc = t5["incremental_seed_shaped"]
        lines.append(f"| incremental pass, seed-shaped (10^3 new on a 10^6 store, "
                     f"{inc.get('facts_touched')} facts touched) | {inc.get('median_ms')} ms"
                     f"{_checkpoint(inc)} | — |")
    if t5.get("found") and not any(t5.get(k) for k in ("full_pass", "full_pass_seed_shaped")):
        lines.append(f"| (format not recognised) | see `paper.json` table5.other_figures: "
                     f"{', '.join(sorted(t5.get('other_figures', {})))} | — |")
    if not t5.get("found"):
        lines.append(f"| per-pass latency | {t5['note']} | "
                     f"{p5['latency_median_ms']['100000']} ms at 10^5 |")
    gl = t5["grounding_lookup"]
    lines.append(f"| query latency p50 / p99 | {gl['p50_ms']:.4f} / {gl['p99_ms']:.4f} ms "
                 f"(GroundingIndex.lookup, in-process) | {p5['query_p50_ms']} / "
                 f"{p5['query_p99_ms']} ms (SQLite SELECT, in-process) |")
    lines += ["", "## Where we differ, and why", "", *[f"- {d}" for d in result["differences"]],
              "", "## Scene choices (fixed)", "", *[f"- {c}" for c in result["choices"]], ""]
    return "\n".join(lines)


def figure5(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = ["uniform", "raw", "calibrated"]
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    for y, control in enumerate(rows):
        ours, theirs = result["v3"]["table1"][control], PAPER["table1"][control]
        ax.hlines(y + 0.15, *[v * 100 for v in ours["ci"]], color="C0", lw=3)
        ax.plot(ours["reduction_mean"] * 100, y + 0.15, "o", color="C0",
                label="robot_memory (mean, 95% BCa CI)" if y == 0 else None)
        for value in ours["per_seed_reduction"]:
            ax.plot(value * 100, y + 0.15, "|", color="C0", ms=10, alpha=0.6)
        ax.hlines(y - 0.15, *[v * 100 for v in theirs["ci"]], color="C1", lw=3)
        ax.plot(theirs["reduction"] * 100, y - 0.15, "s", color="C1",
                label="paper (mean, 95% BCa CI)" if y == 0 else None)
    ax.axvline(0, color="grey", lw=0.8, ls=":")
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("reduction in unproductive attempts vs no_memory (%)")
    ax.set_title("Figure 5 reproduced: 10 seeds, N = 1000 decisions (ticks: per seed)")
    ax.legend(loc="center left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def differences(result: dict) -> list[str]:
    t1 = result["v3"]["table1"]
    zero_03 = sum(r == 0.0 for r in result["v3"]["table2"]["0.3"]["per_seed_reduction"])
    return [
        "Uniform is exactly 0.00% (ours) vs -2.6% (theirs): our four controls face the same "
        "decisions and outcomes (paired), so a control that attempts every grasp is "
        "no_memory; the paper's -2.6% [-4.7%, +0.4%] is the sampling noise of separate draws. "
        "The same holds on every seed where the calibrated planner attempts everything "
        f"(threshold 0.3, prior 0.7/20): {zero_03} of 10 seeds give exactly 0 at threshold "
        "0.3; on the others the held-out unknown_object slice had so few successes that its "
        "shrunk rate fell below 0.3, hence our mean of "
        f"{_pct(result['v3']['table2']['0.3']['reduction_mean'])}.",
        f"Raw and calibrated: {_pct(t1['raw']['reduction_mean'])} and "
        f"{_pct(t1['calibrated']['reduction_mean'])} vs the paper's 79.82%. The figure is set "
        "by the scene (the share of unproductive attempts on the object memory rules out), "
        "which the paper does not fully specify; ours is 1/2 glass_cup, 1/2 unknown_object.",
        "Our attempt counts differ from the paper's 544.4: skipping every unknown_object "
        "decision leaves about N/2 attempts in our scene; the paper's scene evidently holds "
        "other decisions it does not describe.",
        "V1: our rules v1 also write an interaction_pattern fact for the 200 failures (reason "
        "'unspecified'), so semantic_facts holds 2 rows; the skill_success_rate row is the "
        "one the paper checks, and it is exactly one.",
        "V2: different manifest contents give different hashes; our seventh-field analogue "
        "of ecm_registry_hash is capability_registry_hash.",
        "Table 5 comes from bench/results/consolidation_pass.json, whose workload is not the "
        "paper's two-fact stream at 10^2-10^4 rows; the paper's sub-linear size sweep is not "
        "reproduced row by row. Query latency is our in-memory index, not a SQL SELECT.",
    ]


CHOICES = [line.strip("- ").strip() for line in __doc__.split("Choices")[1].split("\n-")[1:]]


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="robot_memory_paper_"))
    try:
        result = {"command": "python -m bench.paper", "seeds": list(SEEDS),
                  "n_decisions": N_DECISIONS, "bootstrap": BOOTSTRAP, "threshold": THRESHOLD,
                  "prior": {"mean": PRIOR_MEAN, "weight": PRIOR_WEIGHT}, "paper": PAPER}
        result["v1"] = v1(workdir)
        _say(f"[paper] V1: {result['v1']['checks_passed']}/{result['v1']['checks_total']} "
             f"checks, idempotent {result['v1']['idempotent']}, "
             f"order invariant {result['v1']['order_invariant']}")
        result["v2"] = v2(workdir)
        _say(f"[paper] V2: byte-equal {result['v2']['byte_equal']}, mutation flips "
             f"{result['v2']['mutation_flips_hash']}")
        result["v3"] = v3_and_sweeps(workdir)
        for control in CONTROLS[1:]:
            row = result["v3"]["table1"][control]
            _say(f"[paper] V3 {control}: reduction {_pct(row['reduction_mean'])} "
                 f"CI {_ci(row['ci'])} (paper: {_pct(PAPER['table1'][control]['reduction'])})")
        (workdir / "table5").mkdir()
        result["table5"] = table5(seed_memory(SEEDS[0], workdir / "table5"))
        result["differences"] = differences(result)
        result["choices"] = CHOICES
        result["runtime_s"] = time.perf_counter() - started
        result["machine"] = {"nproc": os.cpu_count(), "loadavg": list(os.getloadavg())}
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "paper.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
        (RESULTS / "paper.md").write_text(markdown(result))
        figure5(result, RESULTS / "paper_figure5.png")
        _say(f"[paper] wrote bench/results/paper.json, paper.md, paper_figure5.png in "
             f"{result['runtime_s']:.0f} s")
        return 0 if result["v1"]["all_pass"] and result["v2"]["all_pass"] else 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

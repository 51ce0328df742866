"""Latency summaries and the result file every benchmark writes."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def summary_ms(samples_s: list[float]) -> dict[str, float]:
    """p50 / p99 / max / mean of round trips given in seconds, in milliseconds."""
    values = np.asarray(samples_s) * 1000.0
    return {"n": int(values.size), "p50_ms": round(float(np.percentile(values, 50)), 4),
            "p99_ms": round(float(np.percentile(values, 99)), 4),
            "max_ms": round(float(values.max()), 4), "mean_ms": round(float(values.mean()), 4)}


def trials_ms(samples_s: list[float]) -> dict:
    """Each trial and their median, in milliseconds (for a handful of long trials)."""
    return {"trials_ms": [round(s * 1000, 1) for s in samples_s],
            "median_ms": round(statistics.median(samples_s) * 1000, 1)}


def mean_ci(values: list[float], n_resamples: int = 10000, seed: int = 20260524
            ) -> tuple[float, float, str]:
    """95% BCa bootstrap interval of the mean over seeds (bench/paper.py's settings), and
    a note: a sample with no spread has no bootstrap distribution, so its interval is
    the point itself; where BCa cannot be computed (a sample of a few, nearly equal
    values), the percentile interval stands in."""
    from scipy.stats import bootstrap

    data = np.asarray(values, dtype=float)
    if np.ptp(data) == 0.0:
        return float(data[0]), float(data[0]), "degenerate: every seed gives the same value"
    note = ""
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ci = bootstrap((data,), np.mean, n_resamples=n_resamples, method=method,
                           confidence_level=0.95, random_state=seed).confidence_interval
        if np.isfinite(ci.low) and np.isfinite(ci.high):
            return float(ci.low), float(ci.high), note
        note = "percentile interval: BCa undefined for this sample"
    return float(data.min()), float(data.max()), "range: no bootstrap interval"


def python_loop_ms() -> float:
    """A plain interpreter loop of 10^6 additions: how fast this machine runs Python,
    for comparing with figures measured elsewhere (the paper "Episodic-to-Semantic Consolidation
    Without Identity Drift")."""
    started, total = time.perf_counter(), 0
    for i in range(1_000_000):
        total += i
    return round((time.perf_counter() - started) * 1000, 1)


def machine() -> dict:
    """What the ratios were measured on: a noisy 2-core box reads differently from a
    quiet 16-core one."""
    return {"nproc": os.cpu_count(), "usable_cpus": len(os.sched_getaffinity(0)),
            "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
            "python_loop_1e6_ms": min(python_loop_ms() for _ in range(3)),
            "python": platform.python_version(), "platform": platform.platform()}


def write_result(name: str, result: dict, out: str | None = None) -> Path:
    path = Path(out) if out else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    result = {**result, "command": _command(name), "machine": machine()}
    path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return path


def merge_result(name: str, key: str, part: dict, out: str | None = None) -> Path:
    """Set `key` of an existing result file to `part`, the other keys kept as they are.
    The part carries its own command and machine: the file's describe the other keys."""
    path = Path(out) if out else RESULTS / f"{name}.json"
    result = json.loads(path.read_text())
    result[key] = {**part, "command": _command(name), "machine": machine()}
    path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return path


def _command(name: str) -> str:
    return " ".join(["python", "-m", f"bench.{name}", *sys.argv[1:]])

"""Latency summaries and the result file every benchmark writes."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def summary_ms(samples_s: list[float]) -> dict[str, float]:
    values = np.asarray(samples_s) * 1000.0
    return {"n": int(values.size), "p50_ms": round(float(np.percentile(values, 50)), 4),
            "p99_ms": round(float(np.percentile(values, 99)), 4),
            "max_ms": round(float(values.max()), 4), "mean_ms": round(float(values.mean()), 4)}


def write_result(name: str, result: dict, out: str | None = None) -> Path:
    path = Path(out) if out else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    result = {**result, "command": " ".join([Path(sys.executable).name, "-m", f"bench.{name}",
                                             *sys.argv[1:]]),
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "platform": platform.platform()}}
    path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return path

"""docs/performance.md quotes the analogy latency figures (issue 34's speed goals) as
bench/results/grounding_latency.json holds them, with the verdicts the file gives."""

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PERFORMANCE = (ROOT / "docs" / "performance.md").read_text()
RESULT = json.loads((ROOT / "bench" / "results" / "grounding_latency.json").read_text())
ANALOGIES = RESULT["analogies"]


def _words(text: str) -> str:
    return " ".join(text.split())


def _verdict(met: bool) -> str:
    return "**met**" if met else "**missed**"


def test_the_grounding_section_quotes_the_analogy_figures_and_their_command():
    alone, ground = ANALOGIES["lookup_alone"], ANALOGIES["ground"]
    section = _words(PERFORMANCE[PERFORMANCE.index("## Grounding"):
                                 PERFORMANCE.index("## Intake")])
    # --analogies-only records its own command; a full run's is the file's.
    command = ANALOGIES.get("command", RESULT["command"])
    for figure in (f"`{command}`",
                   f"at {alone['known_targets']:,} known targets",
                   f"{alone['p50_ms']} ms p50 / {alone['p99_ms']} ms p99 (goal <= 1 ms: "
                   f"{_verdict(alone['meets_target'])}",
                   f"CPU time was {alone['thread_cpu']['p99_ms']} ms p99",
                   f"at {ground['facts_in_store']:,} facts",
                   f"{ground['ground']['p99_ms']} ms p99 against {ground['echo']['p99_ms']} ms",
                   f"{ground['p99_ratio']}x (goal <= 1.5x: {_verdict(ground['meets_target'])})"):
        assert figure in section, figure


def test_the_glance_table_has_the_analogy_goals():
    glance = PERFORMANCE[PERFORMANCE.index("## At a glance"):PERFORMANCE.index("## Grounding")]
    (row,) = [line for line in glance.splitlines() if "similar-case lookup" in line]
    alone, ground = ANALOGIES["lookup_alone"], ANALOGIES["ground"]
    assert f"{alone['p99_ms']} ms: {_verdict(alone['meets_target'])}" in row
    assert f"{ground['p99_ratio']}x: {_verdict(ground['meets_target'])}" in row
    assert "`grounding_latency.json`" in row

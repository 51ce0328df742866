"""The README is the interface document: it must name every parameter, node and verb."""

import json
import re
from pathlib import Path

from robot_memory.cli import build_parser
from robot_memory.parameters import node_names, node_parameters

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_readme_documents_every_node_and_links_every_parameter():
    parameters_md = (ROOT / "docs" / "parameters.md").read_text()
    assert "(docs/parameters.md)" in README
    for node in node_names():
        assert f"### {node}" in README
        assert f"## `{node}`" in parameters_md
        for name in node_parameters(node):
            assert f"`{name}`" in parameters_md, name


def test_readme_short_parameter_table_names_real_parameters():
    declared = {name for node in node_names() for name in node_parameters(node)}
    table = README[README.index("### Parameters"):README.index("## Interfaces")]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert rows
    for row in rows:
        for name in re.findall(r"`([a-z_]+)`", row.split("|")[1]):
            assert name in declared, name


def test_readme_boot_check_figures_are_the_benchmark_file():
    result = json.loads((ROOT / "bench" / "results" / "boot_check.json").read_text())
    assert f"{result['incremental_boot_check']['median_ms'] / 1000:.2f} s median" in README
    assert f"{result['first_boot_check_no_checkpoint_ms'] / 1000:.1f} s" in README
    assert f"takes {result['full_check_ms'] / 1000:.1f} s" in README


def test_readme_cites_documents_by_title():
    for text in (README, *(path.read_text() for path in (ROOT / "robot_memory").rglob("*.py"))):
        assert not re.search(r"seed 0\d\d|invariant \d", text, re.IGNORECASE)


def test_readme_documents_every_cli_verb_and_the_two_commands():
    verbs = build_parser()._subparsers._group_actions[0].choices
    for verb in verbs:
        assert f"robot-memory {verb}" in README, verb
    assert "make run" in README and "make test" in README


def test_readme_documents_every_interface():
    root = Path(__file__).resolve().parents[2]
    for path in sorted((root / "msg").glob("*.msg")) + sorted((root / "srv").glob("*.srv")):
        assert f"`{path.parent.name}/{path.stem}`" in README, path.name


def test_readme_ingest_figures_are_the_benchmark_file():
    result = json.loads((ROOT / "bench" / "results" / "ingest.json").read_text())
    for rate in result["modes"]["four_process"]["rates"]:
        assert (f"| {rate['rate_per_s']} | {rate['sent']} | {rate['noop_received']} | "
                f"{rate['stored']} | {rate['stored_vs_noop']} |") in README
        assert f"| {rate['logger_cores']} ({rate['logger_cores_dds_threads']}) |" in README
    cores = result["cpu_budget_at_1000"]["live_cores"]
    met = result["goals"]["four_process"]["cpu_at_most_0_1_core_at_1000"]
    words = " ".join(README.split())
    assert f"**{cores} core, goal 0.1 {'met' if met else 'missed'}" in words


def test_readme_hostile_input_figures_are_the_benchmark_file():
    result = json.loads((ROOT / "bench" / "results" / "hostile_input.json").read_text())
    for mode, m in result["modes"].items():
        process, rss = max(m["rss_max_by_phase"].items(),
                           key=lambda kv: kv[1]["hostile_over_baseline"])
        ground = m["ground"]
        assert (f"| {mode} | {process} {rss['baseline_mb']} -> {rss['hostile_mb']} MB "
                f"({rss['hostile_over_baseline']}x) | {m['stored']['valid_stored']} / "
                f"{m['stored']['valid_sent']} "
                f"({m['logger_diagnostics_at_end']['lost_total']} dds_lost) | "
                f"{ground['baseline']['p99_ms']:.1f} -> {ground['hostile']['p99_ms']:.1f} ms "
                f"({ground['p99_ratio']}x) |") in README, mode

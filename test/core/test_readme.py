"""The README and the docs/ pages are the interface documents: together they must name
every parameter, node, verb and interface; their figures are the benchmark files'; and
every link between them leads somewhere."""

import argparse
import json
import re
import shlex
from pathlib import Path

from robot_memory.cli import build_parser
from robot_memory.operation.parameters import node_names, node_parameters

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()
NODES = (DOCS / "nodes.md").read_text()
PERFORMANCE = (DOCS / "performance.md").read_text()
CLI = (DOCS / "cli.md").read_text()
RESULTS = ROOT / "bench" / "results"


def _result(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())


def _words(text: str) -> str:
    return " ".join(text.split())


def test_readme_is_short_and_links_every_docs_page():
    assert len(README.splitlines()) <= 300
    for page in sorted(DOCS.glob("*.md")):
        assert f"(docs/{page.name})" in README, page.name
    assert "(DEVELOPING.md)" in README


def test_readme_test_command_is_the_one_ci_runs():
    block = README[README.index("## The two commands"):]
    block = block[block.index("```bash\n") + 8:]
    block = block[:block.index("```")]
    (command,) = [line.split("#")[0].strip() for line in block.splitlines()
                  if line.startswith("make test")]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert command in ci, command
    target = shlex.split(command)[1]
    assert re.search(rf"^{target}: setup\n\t.*python -m pytest", (ROOT / "Makefile").read_text(),
                     re.MULTILINE)
    assert "make run" in README


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    return {_slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def test_every_link_between_the_documents_leads_somewhere():
    pages = [ROOT / "README.md", ROOT / "DEVELOPING.md", ROOT / "bench" / "README.md",
             *sorted(DOCS.glob("*.md"))]
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
        for link in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", link):
                continue
            path, _, anchor = link.partition("#")
            target = (page.parent / path) if path else page
            assert target.exists(), f"{page.name}: {link}"
            if anchor and target.suffix == ".md":
                assert anchor in _anchors(target), f"{page.name}: {link}"


def test_nothing_cites_a_design_document_that_is_not_in_the_repository():
    texts = [ROOT / "README.md", ROOT / "bench" / "README.md", *DOCS.glob("*.md"),
             *(ROOT / "bench").glob("*.py"), *(ROOT / "robot_memory").rglob("*.py")]
    for path in texts:
        assert not re.search(r"(?<![\w/])DESIGN\.md", path.read_text()), path.name


def test_nodes_page_documents_every_node_and_links_every_parameter():
    parameters_md = (DOCS / "parameters.md").read_text()
    assert "(docs/parameters.md)" in README and "(parameters.md)" in NODES
    for node in node_names():
        assert f"| `{node}` |" in README, node
        assert f"## {node}" in NODES, node
        assert f"## `{node}`" in parameters_md
        for name in node_parameters(node):
            assert f"`{name}`" in parameters_md, name


def test_nodes_page_short_parameter_table_names_real_parameters():
    declared = {name for node in node_names() for name in node_parameters(node)}
    table = NODES[NODES.index("## Parameters"):NODES.index("## Interfaces")]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert rows
    for row in rows:
        for name in re.findall(r"`([a-z_]+)`", row.split("|")[1]):
            assert name in declared, name


def test_readme_cites_documents_by_title():
    texts = [README, (ROOT / "DEVELOPING.md").read_text(),
             *(path.read_text() for path in DOCS.glob("*.md")),
             *(path.read_text() for path in (ROOT / "robot_memory").rglob("*.py"))]
    for text in texts:
        assert not re.search(r"seed 0\d\d|invariant \d", text, re.IGNORECASE)


def test_readme_and_cli_page_document_every_cli_verb():
    verbs = build_parser()._subparsers._group_actions[0].choices
    for verb in verbs:
        assert f"robot-memory {verb}" in README, verb
        assert f"robot-memory {verb}" in CLI, verb


def test_cli_page_names_every_option_of_every_verb():
    def options(parser, verb):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from options(sub, f"{verb} {name}")
            yield from ((verb, o) for o in action.option_strings
                        if o.startswith("--") and o != "--help")

    for verb, parser in build_parser()._subparsers._group_actions[0].choices.items():
        for where, option in options(parser, verb):
            assert option in CLI, f"robot-memory {where} {option}"


def test_readme_and_nodes_page_document_every_interface():
    for path in sorted((ROOT / "msg").glob("*.msg")) + sorted((ROOT / "srv").glob("*.srv")):
        assert f"`{path.parent.name}/{path.stem}`" in README, path.name
        assert f"`{path.parent.name}/{path.stem}`" in NODES, path.name


def test_readme_key_figures_are_the_benchmark_files():
    rows = {line.split("|")[1].strip(): line for line in README.splitlines()
            if line.startswith("| ") and line.count("|") == 4}
    ground = _result("grounding_latency")
    assert f"| {ground['p99_ratio']}x a same-payload echo |" in rows[
        "`ground` p99, 10^6 events and 10^4 facts stored, under load"]
    tails = [cell for cells in ground["tails"]["modes"].values() for cell in cells.values()]
    p50, p99 = ([cell[f"{q}_ratio"] for cell in tails] for q in ("p50", "p99"))
    assert f"| {min(p50)}-{max(p50)}x / {min(p99)}-{max(p99)}x the echo |" in rows[
        "`ground` p50 / p99 with passes and 200-1,000 results/s, both process modes"]
    ingest = _result("ingest")
    assert f"| {ingest['cpu_budget_at_1000']['live_cores']} core |" in rows[
        "logger CPU at 1,000 results/s"]
    sidecar_cpu = {r["rate_per_s"]: r for r in ingest["modes"]["one_process"]["rates"]}[1000]
    assert f"| {sidecar_cpu['logger_cores']} core |" in rows[
        "whole sidecar CPU in one process at 1,000 results/s"]
    ratios = {rate["stored_vs_noop"] for rate in ingest["modes"]["four_process"]["rates"]}
    assert f"| {min(ratios)} |" in rows[
        "results stored / received by a do-nothing subscriber, up to 2,000/s"]
    passes = _result("consolidation_pass")
    full = passes["full_pass_seed_shaped"]
    assert (f"| {full['median_ms']} ms (paper: {full['seed_paper_ms']:.0f} ms) |"
            in rows["full pass over 10^5 events"])
    inc = passes["incremental"]
    assert (f"| {inc['median_ms']} ms, {inc['over_full_pass']}x the full pass |"
            in rows["pass after 1,000 new events on 10^6, 10^4-fact key space"])
    boot = _result("boot_check")["incremental_boot_check"]["median_ms"]
    assert f"| {boot / 1000:.2f} s |" in rows["boot check at 10^6 events (with a checkpoint)"]
    sidecar = _result("sidecar_memory")["one_process"]["total_peak_mb"]
    assert f"| {sidecar} MB |" in rows["whole sidecar in one process, 10^6 events, 10^4 facts"]
    life = _result("lifetime")
    assert (f"| {life['live_mb_peak_until_2x_retention']} -> {life['live_mb_max_after']} MB |"
            in rows["live store while 2x10^6 results are logged (`retain_events` 10^5)"])
    key_space = life["store_bytes"]["key_space_1e4_facts"]["after_ingest_over_canonical"]
    assert f"| {key_space}x its canonical event |" in rows[
        "disk per stored result, 10^4-fact key space"]
    effect = _result("sim_closed_loop")["effect"]
    assert (f"| {effect['unproductive_with']} against {effect['unproductive_without']} "
            f"(-{effect['reduction'] * 100:.1f} %) |") in rows[
        "MuJoCo grasp loop: unproductive attempts, with memory against without"]


def test_performance_page_boot_check_figures_are_the_benchmark_file():
    result = _result("boot_check")
    text = _words(PERFORMANCE)
    assert f"{result['incremental_boot_check']['median_ms'] / 1000:.2f} s median" in text
    assert f"{result['first_boot_check_no_checkpoint_ms'] / 1000:.1f} s" in text
    assert f"takes {result['full_check_ms'] / 1000:.1f} s" in text


def test_performance_page_ingest_figures_are_the_benchmark_file():
    result = _result("ingest")
    for rate in result["modes"]["four_process"]["rates"]:
        assert (f"| {rate['rate_per_s']} | {rate['sent']} | {rate['noop_received']} | "
                f"{rate['stored']} | {rate['stored_vs_noop']} |") in PERFORMANCE
        assert f"| {rate['logger_cores']} ({rate['logger_cores_dds_threads']}) |" in PERFORMANCE
    cores = result["cpu_budget_at_1000"]["live_cores"]
    met = result["goals"]["four_process"]["cpu_at_most_0_1_core_at_1000"]
    assert f"**{cores} core, goal 0.1 {'met' if met else 'missed'}" in _words(PERFORMANCE)


def test_performance_page_jazzy_ingest_figures_are_the_benchmark_file():
    result = _result("ingest_jazzy")
    text = _words(PERFORMANCE)
    rates = [r for mode in result["modes"].values() for r in mode["rates"]]
    assert f"stored / no-op {min(r['stored_vs_noop'] for r in rates)} at every rate" in text
    assert f"the logger {result['cpu_budget_at_1000']['live_cores']} core at 1,000/s" in text
    assert result["machine"]["python"].startswith("3.12")  # a Jazzy run


def test_performance_page_hostile_input_figures_are_the_benchmark_file():
    result = _result("hostile_input")
    for mode, m in result["modes"].items():
        process, rss = max(m["rss_max_by_phase"].items(),
                           key=lambda kv: kv[1]["hostile_over_baseline"])
        ground = m["ground"]
        assert (f"| {mode} | {process} {rss['baseline_mb']} -> {rss['hostile_mb']} MB "
                f"({rss['hostile_over_baseline']}x) | {m['stored']['valid_stored']} / "
                f"{m['stored']['valid_sent']} "
                f"({m['logger_diagnostics_at_end']['lost_total']} dds_lost) | "
                f"{ground['baseline']['p99_ms']:.1f} -> {ground['hostile']['p99_ms']:.1f} ms "
                f"({ground['p99_ratio']}x) |") in PERFORMANCE, mode


def test_performance_page_pass_and_latency_figures_are_the_benchmark_files():
    text = _words(PERFORMANCE)
    passes = _result("consolidation_pass")
    for row in passes["scaling"]["rows"]:
        assert (f"| {row['events']:,} | {row['median_ms']} | {row['p90_ms']} | "
                f"{row['checkpoint_after_median_ms']} | {row['rss_baseline_mb']} | "
                f"{row['rss_peak_mb']} | {row['fact_rows']:,} |") in PERFORMANCE
    assert f"{passes['full_pass_seed_shaped']['median_ms']} ms median" in text
    assert f"{passes['full_pass_key_space']['over_bare_group_by']}x a bare SQLite" in text
    assert f"{passes['incremental']['over_full_pass']}x the full pass" in text
    ground = _result("grounding_latency")
    assert f"p99 ratio of {ground['p99_ratio']} (goal <= 1.5: **met**)" in text
    for cells in ground["tails"]["modes"].values():
        for cell in cells.values():
            assert (f"| {cell['ground']['p50_ms']} / {cell['echo']['p50_ms']} ms | "
                    f"{cell['p50_ratio']}x | {cell['ground']['p99_ms']} / "
                    f"{cell['echo']['p99_ms']} ms | {cell['p99_ratio']}x |") in PERFORMANCE
    sidecar = _result("sidecar_memory")
    assert f"**met**, at {sidecar['one_process']['total_peak_mb']} MB" in text


def test_performance_page_at_a_glance_is_the_benchmark_files():
    table = PERFORMANCE[PERFORMANCE.index("## At a glance"):PERFORMANCE.index("## Grounding")]
    rows = [(line.split("|")[3].strip(), line.split("|")[2]) for line in table.splitlines()
            if line.startswith("| ") and not line.startswith("| goal")]
    passes = _result("consolidation_pass")
    expected = {
        "grounding_latency.json": [f"{_result('grounding_latency')['p99_ratio']}x"],
        "ingest.json": [f"{_result('ingest')['cpu_budget_at_1000']['live_cores']} core"],
        "boot_check.json": [
            f"{_result('boot_check')['incremental_boot_check']['median_ms'] / 1000:.2f} s"],
        "sidecar_memory.json": [f"{_result('sidecar_memory')['one_process']['total_peak_mb']} MB"],
        "report.json": [f"{_result('report')['report_cli']['median_ms'] / 1000:.1f} s"],
    }
    for file, figures in expected.items():
        cells = " ".join(cell for name, cell in rows if name == f"`{file}`")
        for figure in figures:
            assert figure in cells, (file, figure)
    cells = [line for line in table.splitlines() if "`consolidation_pass.json`" in line]
    text = " ".join(cells)
    for figure in (f"{passes['full_pass_seed_shaped']['median_ms']} ms",
                   f"{passes['full_pass_key_space']['over_bare_group_by']}x",
                   f"{passes['incremental']['over_full_pass']}x",
                   f"{passes['incremental']['median_ms']} ms",
                   f"{passes['scaling']['rows'][-1]['rss_peak_mb']} MB"):
        assert figure in text, figure


def test_readme_and_performance_page_changing_world_figures_are_the_benchmark_file():
    result = _result("changing_world")
    v2, v1 = result["goals"]["memory:v2"]["step"], result["goals"]["memory:v1"]["step"]
    headline = (f"{v2['avoidable_failures_mean']} against {v1['avoidable_failures_mean']} "
                f"({v2['times_fewer_than_today']:.1f}x fewer)")
    rows = {line.split("|")[1].strip(): line for line in README.splitlines()
            if line.startswith("| ") and line.count("|") == 4}
    assert f"| {headline} |" in rows[
        "a step change in what works, a pass a day: avoidable failures in the 30 days after, "
        "rules v2.0 against v1.0"]
    glance = PERFORMANCE[PERFORMANCE.index("## At a glance"):PERFORMANCE.index("## Grounding")]
    assert (f"| {v2['avoidable_failures_mean']}: "
            f"**{'met' if v2['failures_at_most_contest_min_plus_3'] else 'missed'}**; "
            f"{v2['times_fewer_than_today']:.1f}x fewer ({v1['avoidable_failures_mean']}): "
            f"**{'met' if v2['at_least_5x_fewer_than_today'] else 'missed'}**") in glance
    section = PERFORMANCE[PERFORMANCE.index("## Changing world"):]
    section = section[:section.index("\n## ")]
    labels = {"steady": "steady (nothing changes)"}
    for scenario in ("step", "drift", "burst", "steady"):
        cells = [result["results"][scenario][arm]["changed"]["avoidable_failures"]
                 for arm in result["arms"]]
        assert (f"| {labels.get(scenario, scenario)} | "
                + " | ".join(f"{c['mean']:.2f} ({c['ci95'][0]:.2f} to {c['ci95'][1]:.2f})"
                             for c in cells) + " |") in section, scenario
    for scenario in ("step", "drift", "burst"):
        goals = result["goals"]["memory:v2"][scenario]
        assert f"{goals['avoidable_failures_mean']}" in section, scenario
        assert f"{goals['times_fewer_than_today']:.1f}x" in section, scenario
        assert goals["bound"] == 8  # the section's "+ 3 = 8"


def test_performance_page_lifetime_figures_are_the_benchmark_file():
    result = _result("lifetime")
    section = PERFORMANCE[PERFORMANCE.index("## A working life"):]
    for figure in (f"{result['live_mb_max_after']} MB", f"{result['compactions']} compactions",
                   f"{result['bytes_per_result_over_canonical']}x",
                   f"{result['compaction_s_per_1e5_events']['median']} s per 10^5"):
        assert figure in section, figure
    for shape in result["store_bytes"].values():
        for figure in (f"{shape['bytes_per_result_after_ingest']} B = "
                       f"{shape['after_ingest_over_canonical']}x",
                       f"{shape['bytes_per_result_after_a_pass']} B = "
                       f"{shape['after_a_pass_over_canonical']}x"):
            assert figure in section, figure
    glance = PERFORMANCE[PERFORMANCE.index("## At a glance"):PERFORMANCE.index("## Grounding")]
    assert f"{result['live_mb_peak_until_2x_retention']} -> {result['live_mb_max_after']} MB" \
        in glance
    for goal, met in result["goals"].items():
        assert isinstance(met, bool), goal


def _transfer_figures() -> dict[str, str]:
    """The figures of bench/results/sim_transfer.json the README and docs/validation.md
    quote, as they are written there."""
    result = _result("sim_transfer")
    similar = result["experiments"]["analogies"]
    effect = similar["effect"]
    saved = effect["saved_per_episode"]
    misleading = result["misleading"]["analogies"]
    ((target, arms),) = misleading["per_object"].items()
    own = {t: a["with"]["episode_own_fact_first_served"]
           for t, a in similar["per_object"].items()}
    reduction = effect["reduction"] * 100
    forces = " / ".join(f"{f:g}" for f in arms["with"]["borrowed_forces_n"])
    return {
        "readme_similar": f"| {effect['unproductive_with']} against "
                          f"{effect['unproductive_without']} (-{reduction:.1f} %) |",
        "readme_misleading": f"| {misleading['effect']['unproductive_with']} against "
                             f"{misleading['effect']['unproductive_without']}; own fact from "
                             f"attempt {arms['with']['episode_own_fact_first_served']} |",
        "similar": f"{effect['unproductive_without']} unproductive attempts without analogies "
                   f"and {effect['unproductive_with']} with them, over {similar['episodes']} "
                   f"episodes",
        "saved": f"{saved['mean']:.3f} unproductive attempts saved per episode (95 % BCa CI "
                 f"{saved['ci95'][0]:.3f} to {saved['ci95'][1]:.3f})",
        "answers": f"{similar['analogy_answers_with']} ANALOGY answers",
        "own": "from attempt " + " / ".join(str(v) for v in sorted(set(own.values()))),
        "misleading": f"{target}: {arms['without']['unproductive']} unproductive attempts "
                      f"without analogies, {arms['with']['unproductive']} with them",
        "borrowed": f"{arms['with']['borrowed_unproductive']} of its "
                    f"{arms['with']['borrowed_attempts']} attempts at the borrowed "
                    f"{forces} N failed",
        "takeover": f"its own fact from attempt {arms['with']['episode_own_fact_first_served']}, "
                    f"first success at attempt {arms['with']['episode_of_first_success']} "
                    f"(without analogies: {arms['without']['episode_of_first_success']})",
    }


def test_readme_and_validation_page_transfer_figures_are_the_sim_file():
    figures = _transfer_figures()
    rows = {line.split("|")[1].strip(): line for line in README.splitlines()
            if line.startswith("| ") and line.count("|") == 4}
    assert figures["readme_similar"] in rows[
        "MuJoCo, held-out objects like known ones: unproductive attempts, with analogies "
        "against without"]
    assert figures["readme_misleading"] in rows[
        "MuJoCo, a look-alike that needs another force: the same, misleading analogy"]
    validation = _words((DOCS / "validation.md").read_text())
    for name in ("similar", "saved", "answers", "own", "misleading", "borrowed", "takeover"):
        assert figures[name] in validation, (name, figures[name])


def _priors_figures() -> dict[str, str]:
    """The fleet-prior figures of bench/results/sim_transfer.json, as the README and
    docs/validation.md write them."""
    result = _result("sim_transfer")
    joins = result["experiments"]["priors"]
    effect, saved = joins["effect"], joins["effect"]["saved_per_episode"]
    misleading = result["misleading"]["priors"]
    ((target, arms),) = misleading["per_object"].items()
    with_, without = arms["with"], arms["without"]
    forces = " / ".join(f"{f:g}" for f in with_["borrowed_forces_n"])
    return {
        "readme_joins": f"| {effect['unproductive_with']} against "
                        f"{effect['unproductive_without']} (-{effect['reduction'] * 100:.1f} %) |",
        "readme_misleading": f"| {with_['unproductive']} against {without['unproductive']}; "
                             f"own fact from attempt {with_['episode_own_fact_first_served']} |",
        "joins": f"{effect['unproductive_without']} unproductive attempts without priors and "
                 f"{effect['unproductive_with']} with them, over {joins['episodes']} episodes",
        "saved": f"{saved['mean']:.3f} unproductive attempts saved per episode (95 % BCa CI "
                 f"{saved['ci95'][0]:.3f} to {saved['ci95'][1]:.3f})",
        "answers": f"{joins['prior_answers_with']} PRIOR answers",
        "misleading": f"{target}: {without['unproductive']} unproductive attempts without "
                      f"priors, {with_['unproductive']} with them",
        "borrowed": f"{with_['borrowed_unproductive']} of its {with_['borrowed_attempts']} "
                    f"attempts at the borrowed {forces} N failed",
        "takeover": f"its own fact was served from attempt "
                    f"{with_['episode_own_fact_first_served']}, no prior was served after "
                    f"that, and the first success came at attempt "
                    f"{with_['episode_of_first_success']} (without priors: "
                    f"{without['episode_of_first_success']})",
    }


def test_readme_and_validation_page_prior_figures_are_the_sim_file():
    figures = _priors_figures()
    rows = {line.split("|")[1].strip(): line for line in README.splitlines()
            if line.startswith("| ") and line.count("|") == 4}
    assert figures["readme_joins"] in rows[
        "MuJoCo, a second robot of the same arm joins: unproductive attempts, with fleet "
        "priors against without"]
    assert figures["readme_misleading"] in rows[
        "MuJoCo, a site whose glass_cup cracks at the first robot's force: the same, "
        "misleading prior"]
    validation = _words((DOCS / "validation.md").read_text())
    for name in ("joins", "saved", "answers", "misleading", "borrowed", "takeover"):
        assert figures[name] in validation, (name, figures[name])

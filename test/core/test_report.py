"""robot-memory report: every section and figure is there for a known store, every caption
number is the fact's own, and the page is self-contained (a real Chromium opens it with no
request and no console error)."""

import json
import subprocess
import sys

import pytest
from browser import open_page
from helpers import result_event
from report_html import SECTIONS, ReportParser

from robot_memory.consolidation import consolidation_pass
from robot_memory.consolidation import overrides as ov
from robot_memory.event_kinds import FACT_CONSULTATION, KNOWLEDGE_CONFLICT
from robot_memory.manifest import load_manifest
from robot_memory.store import MemoryStore, NewEvent

DAY = 86400


def run(*args):
    return subprocess.run([sys.executable, "-m", "robot_memory.cli", *args],
                          capture_output=True, text=True, timeout=120)


def known_store(partition):
    """Three skill x target x environment keys, two zones, a contested fact, an operator
    invalidation and grounding consultations from two requesters."""
    events = [result_event(i * 60, success=i % 4 != 0, force=20.0 + i % 3, zone="shelf_a",
                           observations={"mass_kg": 0.2}) for i in range(30)]
    events += [result_event(100 + i, success=i % 2 == 0, skill="navigation.dock",
                            target="dock_1", env="ward_2", zone="corridor", force=5.0,
                            reason="blocked" if i % 4 else "collision") for i in range(16)]
    partition.append_many(events)
    consolidation_pass(partition)
    partition.append_many([result_event(2 * DAY + i, target="mug", env="lab") for i in range(12)])
    consolidation_pass(partition)
    partition.append_many([result_event(9 * DAY + i, success=False, target="mug", env="lab")
                           for i in range(12)])
    consolidation_pass(partition)
    zone = next(f for f in partition.facts() if f.key == "zone + corridor")
    ov.record_invalidation(partition, "ana", "miscalibrated map", zone, 9 * DAY + 100)
    consolidation_pass(partition)
    rate = next(f for f in partition.facts() if f.key.startswith("manipulation.grasp + glass"))
    partition.append_many([NewEvent(FACT_CONSULTATION, {
        "consultation_id": i, "requester": "planner_a" if i % 3 else "planner_b",
        "intent_id": "", "status": "OK", "reason_code": "", "query": {},
        "facts": [{"fact_id": rate.id, "kind": rate.kind, "key": rate.key,
                   "rule_version": rate.rule_version}]}, 9 * DAY + 200 + i) for i in range(7)])
    assert partition.count_events(KNOWLEDGE_CONFLICT) >= 1


@pytest.fixture
def report(tmp_path, db_url, manifest_file):
    store = MemoryStore(db_url)
    known_store(store.partition(load_manifest(manifest_file).identity_hash()))
    store.close()
    out = tmp_path / "report.html"
    made = run("report", "--out", str(out), "--db", db_url, "--manifest", str(manifest_file))
    assert made.returncode == 0, made.stderr
    facts = json.loads(run("facts", "--json", "--db", db_url, "--manifest",
                           str(manifest_file)).stdout)
    return out, {(f["kind"], f["key"]): f for f in facts}


def test_sections_figures_and_caption_numbers_equal_the_facts(report):
    out, facts = report
    parser = ReportParser()
    parser.feed(out.read_text(encoding="utf-8"))
    assert SECTIONS <= parser.sections
    assert all(f["svg"] and f["caption"] for f in parser.figures)
    by_section = {}
    for figure in parser.figures:
        by_section.setdefault(figure["attrs"]["data-section"], []).append(figure)
    rates = [k for k in facts if k[0] == "skill_success_rate"]
    assert len(by_section["rates"]) == len(rates) == 3
    for figure in by_section["rates"]:
        fact = facts[("skill_success_rate", figure["attrs"]["data-fact-key"])]
        assert figure["numbers"] == {"n": fact["value"]["n"],
                                     "successes": fact["value"]["successes"],
                                     "rate": fact["value"]["rate"],
                                     "confidence": fact["confidence"], "status": fact["status"]}
    contested = next(f for f in by_section["rates"] if f["numbers"]["status"] == "contested")
    assert contested["attrs"]["data-fact-key"] == "manipulation.grasp + mug + lab"
    assert len(by_section["parameters"]) == 3
    for figure in by_section["parameters"]:
        fact = facts[("skill_success_rate", figure["attrs"]["data-fact-key"])]
        band = fact["value"]["recommended_parameters"][figure["attrs"]["data-parameter"]]
        assert figure["numbers"] == {k: band[k] for k in ("median", "q1", "q3", "n")}
    (zone_figure,) = by_section["zones"]
    zone = facts[("zone_risk", zone_figure["attrs"]["data-fact-key"])]
    assert zone_figure["numbers"] == {"incidents": zone["value"]["incidents"],
                                      "n": zone["value"]["n"],
                                      "failure_rate": zone["value"]["failure_rate"]}
    zone_rows = [r for r in parser.rows if ("zone_risk", r["key"]) in facts]
    assert {r["key"] for r in zone_rows} == {"zone + shelf_a", "zone + corridor",
                                             "environment + lab"}
    for row in zone_rows:
        fact = facts[("zone_risk", row["key"])]
        assert row["numbers"] == {**{k: fact["value"][k] for k in
                                     ("n", "incidents", "safety_incidents", "failure_rate")},
                                  "status": fact["status"]}
    assert {r["numbers"]["status"] for r in zone_rows} >= {"active", "invalidated"}
    (consulted,) = by_section["consultations"]
    assert consulted["numbers"] == {"consultations": 7}
    assert consulted["attrs"]["data-fact-key"].startswith("manipulation.grasp + glass_cup")
    assert "planner_a (4), planner_b (3)" in out.read_text()


def test_report_fetches_nothing_and_is_readable_without_colour(report):
    out, _ = report
    text = out.read_text(encoding="utf-8")
    parser = ReportParser()
    parser.feed(text)
    assert parser.fetching == []
    assert len(parser.ids) == len(set(parser.ids))  # inline SVGs share one id space
    assert not parser.tags & {"script", "link", "img", "iframe", "object", "embed"}
    assert "<!DOCTYPE svg" not in text and "@import" not in text
    # Colour is never the only cue: hatching patterns, distinct markers, written statuses.
    assert text.count("<pattern") >= 4
    assert "contested" in text and "candidate" in text


def test_report_renders_in_headless_chromium(report, tmp_path):
    out, _ = report
    page = open_page(out)
    (tmp_path / "report.png").write_bytes(page.screenshot)
    assert page.console_errors == [] and page.failed_requests == []
    assert page.requests == [out.resolve().as_uri()]
    assert page.screenshot.startswith(b"\x89PNG") and len(page.screenshot) > 50_000


def test_the_browser_check_catches_console_errors_and_requests(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><p>x</p><img src="http://127.0.0.1:9/none.png">'
                   '<script>console.error("boom")</script>')
    page = open_page(bad)
    assert "boom" in page.console_errors and page.failed_requests
    assert "http://127.0.0.1:9/none.png" in page.requests

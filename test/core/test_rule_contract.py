"""The rule contract of docs/rules.md, checked on the worked example of that page (a toy
rule added through the documented interface only, taken from the page's code block) and
on the four rules v1.

A rule is folded here exactly as the page describes a pass doing it: extract each
record into (group, item) pairs, fold each item into its group's JSON state, render
each group. The properties every rule must have: the facts do not depend on the order
of the records, nor on how they are cut into passes (the state is stored as JSON
between passes), and a record the rule cannot use is skipped with a reason.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from robot_memory.canonical import canonical_json
from robot_memory.consolidation.rules import RULES, RulesConfig, SkipRecord
from robot_memory.records import ExecutionRecord


DOC = Path(__file__).resolve().parents[2] / "docs" / "rules.md"


def _example_from_the_page():
    """The worked example of docs/rules.md, run as the page prints it."""
    text = DOC.read_text(encoding="utf-8")
    block = next(part.split("```", 1)[0] for part in text.split("```python\n")[1:]
                 if "class SkillDuration" in part)
    namespace: dict[str, Any] = {}
    exec(compile(block, str(DOC), "exec"), namespace)
    return namespace["SkillDuration"]


SkillDuration = _example_from_the_page()


def fold_in_passes(rule, records: list[tuple[int, ExecutionRecord]], config: RulesConfig,
                   cuts: list[int]) -> tuple[str, dict[str, int]]:
    """The facts (canonical JSON) and skip counts after folding `records` in passes
    ending at `cuts`, the states stored as JSON between passes as the store keeps them."""
    stored: dict[str, str] = {}
    skipped: dict[str, int] = {}
    start = 0
    for end in [*cuts, len(records)]:
        states = {group: json.loads(text) for group, text in stored.items()}
        for event_id, record in records[start:end]:
            try:
                items = rule.extract(record)
            except SkipRecord as skip:
                skipped[f"{rule.kind}:{skip.reason}"] = skipped.get(
                    f"{rule.kind}:{skip.reason}", 0) + 1
                continue
            for group, item in items:
                rule.fold(states.setdefault(group, {}), item, event_id, config)
        stored = {group: canonical_json(state) for group, state in states.items()}
        start = end
    facts = [fact for group in sorted(stored)
             for fact in rule.render(group, json.loads(stored[group]), config)]
    return canonical_json([{"kind": f.kind, "key": f.key, "value": f.value, "status": f.status,
                            "confidence": f.confidence, "n": f.n_observations,
                            "last_event_id": f.last_supporting_event_id,
                            "last_updated_ns": f.last_updated_ns} for f in facts]), skipped


def _records(seed: int, count: int = 60) -> list[tuple[int, ExecutionRecord]]:
    rng = random.Random(seed)
    records = []
    for event_id in range(1, count + 1):
        success = rng.random() < 0.7
        records.append((event_id, ExecutionRecord(
            stamp_ns=1_000_000_000_000 + event_id * rng.randint(1, 7200) * 1_000_000_000,
            skill_id=rng.choice(["manipulation.grasp", "navigation.dock"]),
            target_class=rng.choice(["glass_cup", "box", ""]),
            environment=rng.choice(["sim_relaxed", "kitchen"]),
            zone=rng.choice(["", "zone_a"]),
            parameters={"force_n": rng.choice([5.0, 15.0, 25.0])},
            observations={"mass_kg": round(rng.uniform(0.1, 0.3), 3)} if rng.random() < 0.8
            else {},
            success=success, failure_reason="" if success else rng.choice(["slipped",
                                                                           "collision"]),
            duration_s=rng.choice([0.0, 1.5, 2.25, 3.0]))))
    return records


@pytest.mark.parametrize("rule", [SkillDuration(), *RULES], ids=lambda rule: rule.kind)
def test_facts_do_not_depend_on_order_or_on_cuts_into_passes(rule):
    config = RulesConfig()
    records = _records(seed=3)
    expected, skipped = fold_in_passes(rule, records, config, cuts=[])
    assert json.loads(expected), "the records make at least one fact"
    shuffled = records[:]
    random.Random(5).shuffle(shuffled)
    assert fold_in_passes(rule, shuffled, config, cuts=[]) == (expected, skipped)
    for cuts in ([1], [17, 18, 40], list(range(1, len(records), 7))):
        assert fold_in_passes(rule, records, config, cuts) == (expected, skipped), cuts


def test_the_example_rule_renders_what_the_page_shows():
    config = RulesConfig()
    records = [(i + 1, ExecutionRecord(stamp_ns=(100 + i) * 10**9, skill_id="navigation.dock",
                                       environment="kitchen", success=True, duration_s=d))
               for i, d in enumerate([2.0, 2.5, 3.0, 0.0, 2.5])]
    facts, skipped = fold_in_passes(SkillDuration(), records, config, cuts=[2])
    (fact,) = json.loads(facts)
    assert skipped == {"skill_duration:no_duration": 1}
    assert fact["key"] == "navigation.dock + kitchen" and fact["status"] == "active"
    assert fact["value"]["n"] == 4 and fact["value"]["mean_s"] == 2.5
    assert fact["value"]["band_s"]["median"] == 2.5 and fact["confidence"] == 0.571429
    assert (fact["last_event_id"], fact["last_updated_ns"]) == (5, 104 * 10**9)


def test_the_example_rule_meets_the_protocol_the_page_documents():
    rule = SkillDuration()
    for name in ("kind", "extract", "fold", "render"):
        assert hasattr(rule, name)
    assert all(hasattr(rule, name) for real in RULES for name in ("kind", "extract", "fold",
                                                                    "render"))
    assert rule.kind not in {real.kind for real in RULES}

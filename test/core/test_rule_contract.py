"""The rule contract of docs/rules.md, checked on the worked example of that page (a toy
rule added through the documented interface only, taken from the page's code block) and
on the four rules v1.

The methods the page documents are those of the `Rule` protocol and exactly those that
a consolidation pass, `explain` and the reference engine call on a rule, so a rule
written from the page runs. The example, given to a pass as the page shows, runs in real
passes on SQLite beside the four rules. The properties every rule must have: the facts
do not depend on the order of the records, nor on how they are cut into passes (the
state is stored as JSON between passes), adding the results up one at a time (as
`explain` reads them) gives the facts the pass gives, a record the rule cannot use is
skipped with a reason, and `explain` finds the results behind every fact.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import oracle_consolidation
import pytest

from robot_memory.grounding import explain
from robot_memory.canonical import canonical_json
from robot_memory.consolidation import consolidation_pass, facts_snapshot
from robot_memory.consolidation.partials import partials_of_result
from robot_memory.consolidation.rules import RULES, Rule, RulesConfig
from robot_memory.intake.records import ExecutionRecord
from robot_memory.store import MemoryStore


DOC = Path(__file__).resolve().parents[2] / "docs" / "rules.md"

IDENT = "d" * 64


def _block_of_the_page(marker: str) -> str:
    """The page's python code block that holds `marker`."""
    text = DOC.read_text(encoding="utf-8")
    return next(part.split("```", 1)[0] for part in text.split("```python\n")[1:]
                if marker in part)


def _example_from_the_page():
    """The worked example of docs/rules.md, run as the page prints it."""
    namespace: dict[str, Any] = {}
    exec(compile(_block_of_the_page("class TriedParameters"), str(DOC), "exec"), namespace)
    return namespace["TriedParameters"]


TriedParameters = _example_from_the_page()


def add_up_in_passes(rule, records: list[tuple[int, ExecutionRecord]], config: RulesConfig,
                     cuts: list[int]) -> tuple[str, dict[str, int]]:
    """The facts (canonical JSON) and skip counts after adding `records` up one at a time
    (each a range of its own, as `explain` reads them) in passes ending at `cuts`, the
    states stored as JSON between passes as the store keeps them."""
    stored: dict[str, str] = {}
    skipped: dict[str, int] = {}
    start = 0
    for end in [*cuts, len(records)]:
        states = {group: json.loads(text) for group, text in stored.items()}
        for event_id, record in records[start:end]:
            partials = partials_of_result((rule,), record.payload(), record.stamp_ns,
                                          event_id, config)
            for reason, count in partials.skipped.items():
                skipped[reason] = skipped.get(reason, 0) + count
            for group, partial in partials.groups.get(rule.kind, {}).items():
                rule.merge(states.setdefault(group, {}), partial, config)
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


@pytest.mark.parametrize("rule", [TriedParameters(), *RULES], ids=lambda rule: rule.kind)
def test_facts_do_not_depend_on_order_or_on_cuts_into_passes(rule):
    config = RulesConfig()
    records = _records(seed=3)
    expected, skipped = add_up_in_passes(rule, records, config, cuts=[])
    assert json.loads(expected), "the records make at least one fact"
    shuffled = records[:]
    random.Random(5).shuffle(shuffled)
    assert add_up_in_passes(rule, shuffled, config, cuts=[]) == (expected, skipped)
    for cuts in ([1], [17, 18, 40], list(range(1, len(records), 7))):
        assert add_up_in_passes(rule, records, config, cuts) == (expected, skipped), cuts


# -- the documented methods are the protocol's, and those the code calls -------------
def _documented_members() -> set[str]:
    block = _block_of_the_page("class Rule(Protocol)")
    return set(re.findall(r"^    def (\w+)\(", block, re.MULTILINE)) | set(
        re.findall(r"^    (\w+): \w+", block, re.MULTILINE))


def test_the_page_documents_the_rule_protocol():
    protocol = {name for name, value in vars(Rule).items()
                if callable(value) and not name.startswith("_")} | set(Rule.__annotations__)
    assert _documented_members() == protocol
    for rule in (TriedParameters(), *RULES):
        assert all(hasattr(rule, name) for name in protocol), rule.kind


def _recording(rule, seen: set[str]):
    """The rule, noting every attribute the code reads from it in `seen`."""

    class Recorded(type(rule)):
        def __getattribute__(self, name):
            if not name.startswith("__"):
                seen.add(name)
            return super().__getattribute__(name)

    recorded = object.__new__(Recorded)
    recorded.__dict__.update(vars(rule))
    return recorded


def _append(part, records: list[ExecutionRecord]) -> None:
    for record in records:
        part.append("execution_result", record.payload(), record.stamp_ns)


def _dock_records() -> list[ExecutionRecord]:
    """The results of the page's worked example."""
    return [ExecutionRecord(stamp_ns=(100 + i) * 10**9, skill_id="navigation.dock",
                            target_class="dock_a", environment="lab", success=i != 2,
                            failure_reason="" if i != 2 else "missed",
                            parameters={} if speed is None else {"speed": speed})
            for i, speed in enumerate([0.2, 0.3, 0.3, None, 0.4])]


def test_the_documented_methods_are_those_the_pass_explain_and_the_reference_call(
        tmp_path, monkeypatch):
    seen: dict[str, set[str]] = {"pass": set(), "explain": set(), "reference": set()}
    records = [record for _, record in _records(seed=4, count=40)]

    def rules_for(caller: str) -> tuple:
        return tuple(_recording(rule, seen[caller]) for rule in RULES)

    store = MemoryStore(f"sqlite:///{tmp_path / 'pass.db'}")
    part = store.partition(IDENT)
    _append(part, records[:25])
    consolidation_pass(part, rules=rules_for("pass"))
    _append(part, records[25:])
    consolidation_pass(part, rules=rules_for("pass"))  # merges into stored states
    monkeypatch.setattr(explain, "RULES_BY_KIND", {r.kind: r for r in rules_for("explain")})
    for fact in {fact.kind: fact for fact in part.facts()}.values():
        explain.explain_fact(part, fact)
    store.close()

    reference = MemoryStore(f"sqlite:///{tmp_path / 'reference.db'}")
    part = reference.partition(IDENT)
    _append(part, records)
    monkeypatch.setattr(oracle_consolidation, "RULES", rules_for("reference"))
    monkeypatch.setattr(oracle_consolidation, "RULES_BY_KIND",
                        {rule.kind: rule for rule in oracle_consolidation.RULES})
    oracle_consolidation.consolidation_pass(part)
    reference.close()

    documented = _documented_members()
    assert seen["pass"] == {"kind", "parameter_buckets", "add_outcome", "add_values", "merge",
                            "fact_keys", "render"}
    # explain adds each result up alone, through the pass's own methods.
    assert seen["explain"] == {"kind", "add_outcome", "add_values", "fact_keys"}
    # The reference engine folds with its own per-record writing (test/oracle_rules.py).
    assert seen["reference"] == {"kind", "render"}
    assert set().union(*seen.values()) == documented


# -- the page's example runs -----------------------------------------------------------
def test_the_example_rule_runs_in_a_real_pass_as_the_page_gives_it(tmp_path, monkeypatch):
    """The page's example rule, given to a pass by the page's own snippet, on SQLite."""
    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.db'}")
    _append(store.partition(IDENT), _dock_records())  # events 1 to 5
    store.close()
    monkeypatch.chdir(tmp_path)  # the snippet opens sqlite:///memory.db
    namespace: dict[str, Any] = {"TriedParameters": TriedParameters, "identity_hash": IDENT}
    exec(compile(_block_of_the_page("rules=(*RULES, TriedParameters())"), str(DOC), "exec"),
         namespace)
    part, store = namespace["partition"], namespace["store"]
    (fact,) = namespace["tried"]
    assert fact.key == "navigation.dock + dock_a" and fact.status == "active"
    assert fact.n_observations == 5 and fact.value["n"] == 5
    speed = fact.value["parameters"]["speed"]
    assert (speed["median"], speed["n"], speed["min"], speed["max"]) == (0.3, 4, 0.2, 0.4)
    assert fact.confidence == 0.625
    assert (fact.last_supporting_event_id, fact.last_updated_ns) == (5, 104 * 10**9)
    assert {f.kind for f in part.facts()} >= {"skill_success_rate", "tried_parameters"}
    assert consolidation_pass(part, rules=(*RULES, TriedParameters())).facts_touched == 0
    monkeypatch.setattr(explain, "RULES_BY_KIND",
                        {rule.kind: rule for rule in (*RULES, TriedParameters())})
    support = explain.explain_fact(part, fact)["supporting_events"]
    assert support["count"] == 5 and support["event_ids"] == [1, 2, 3, 4, 5]
    store.close()


def test_the_example_rule_gives_the_same_facts_one_result_at_a_time_and_with_any_cuts(
        tmp_path):
    rules = (TriedParameters(),)
    records = _records(seed=6)
    one_at_a_time, _ = add_up_in_passes(TriedParameters(), records, RulesConfig(),
                                        cuts=[9, 30])
    snapshots = set()
    for n, cuts in enumerate(([], [1, 2, 3], [20, 41])):
        store = MemoryStore(f"sqlite:///{tmp_path / f'{n}.db'}")
        part = store.partition(IDENT)
        for index, (_, record) in enumerate(records):
            if index in cuts:
                consolidation_pass(part, rules=rules)
            _append(part, [record])
        consolidation_pass(part, rules=rules)
        snapshots.add(facts_snapshot(part))
        passed = canonical_json([{"kind": f.kind, "key": f.key, "value": f.value,
                                  "status": f.status, "confidence": f.confidence,
                                  "n": f.n_observations,
                                  "last_event_id": f.last_supporting_event_id,
                                  "last_updated_ns": f.last_updated_ns}
                                 for f in sorted(part.facts(), key=lambda f: f.key)])
        if not cuts:  # event ids are the records' only when no run event comes between
            assert passed == one_at_a_time
        store.close()
    assert len(snapshots) == 1


def test_explain_finds_the_results_behind_every_fact_of_every_rule(tmp_path, monkeypatch):
    """Each result read alone through a rule's methods supports exactly the facts the
    pass counted it in: as many results as the fact's observations, the newest of them
    its last supporting event."""
    rules = (*RULES, TriedParameters())
    monkeypatch.setattr(explain, "RULES_BY_KIND", {rule.kind: rule for rule in rules})
    store = MemoryStore(f"sqlite:///{tmp_path / 'm.db'}")
    part = store.partition(IDENT)
    _append(part, [record for _, record in _records(seed=8)])
    consolidation_pass(part, rules=rules)
    facts = part.facts()
    assert {fact.kind for fact in facts} == {rule.kind for rule in rules}
    for fact in facts:
        support = explain.explain_fact(part, fact)["supporting_events"]
        which = (fact.kind, fact.key)
        assert support["count"] == fact.n_observations, which
        assert max(support["event_ids"]) == fact.last_supporting_event_id, which
    store.close()

"""An amended attempt counts once, with its final outcome, whatever the order the results
arrive in and however the log is cut into passes (docs/consolidation.md#amendments):
random attempts, amendments (matching or not, of known attempts or of none, tied in
stamp) and plain results, appended in random orders with passes at random points, on
SQLite and on a real PostgreSQL server. The facts must be the bytes the reference
engine's replay (test/oracle_consolidation.py, which resolves the amendments over the
whole log) makes, and the same in every order and cut."""

import json
import random
import re
import tempfile

import oracle_consolidation
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_memory.consolidation import RulesConfig, consolidation_pass, facts_snapshot
from robot_memory.consolidation.consolidation_pass import replay_snapshot
from robot_memory.consolidation.overrides import record_reset
from robot_memory.consolidation.rules import RULE_VERSION
from robot_memory.grounding.explain import explain_fact, find_fact, format_explanation
from robot_memory.retention.compaction import compact, compactable_until
from robot_memory.store import MemoryStore
from robot_memory.store.schema import RollupShape

IDENT = "a" * 64
# Buckets of 10 s over stamps across 600 s, with a fold horizon past all of them (the
# horizon's limit: docs/consolidation.md#amendments) and the contradiction test live.
CONFIG = RulesConfig(time_bucket_s=10.0, half_life_s=30.0, safety_half_life_s=20.0,
                     recent_window_s=60.0, contest_min_observations=2, contest_z=1.0,
                     promotion_min_observations=2)
REASONS = ["", "slipped", "collision", "dropped"]

fields = st.fixed_dictionaries({
    "skill_id": st.sampled_from(["manipulation.grasp", "nav.dock"]),
    "target_class": st.sampled_from(["", "cup", "box"]),
    "environment": st.sampled_from(["sim", "lab"]),
    "zone": st.sampled_from(["", "z1"]),
    "success": st.booleans(),
    "failure_reason": st.sampled_from(REASONS),
    "parameters": st.dictionaries(st.sampled_from(["force_n", "speed"]),
                                  st.sampled_from([1.5, 2.0, 5.0, 24.7]), max_size=2),
    "observations": st.dictionaries(st.just("mass_kg"), st.sampled_from([0.2, 0.3]),
                                    max_size=1),
    "stamp_s": st.integers(0, 600),
})
# An amendment: of attempt `of` (one of the attempts drawn, or one never given), its
# outcome and stamp (few stamps: ties are broken by the hash), and whether it names the
# attempt's zone wrongly (refused).
amendment = st.fixed_dictionaries({
    "of": st.integers(0, 5), "success": st.booleans(),
    "failure_reason": st.sampled_from(REASONS), "stamp_s": st.sampled_from([300, 400, 400]),
    "notes": st.sampled_from(["", "late"]), "mismatch": st.sampled_from([False, False, True]),
})
scenario = st.tuples(st.lists(fields, min_size=1, max_size=5),  # the attempts' originals
                     st.lists(amendment, max_size=8),
                     st.lists(fields, max_size=5))  # plain results


def payloads(originals, amendments, plain):
    """(payload, stamp_ns) of every result of a scenario, in the order drawn."""
    def result(body, **names):
        payload = {k: v for k, v in body.items() if k != "stamp_s"}
        if payload["success"]:
            payload["failure_reason"] = ""
        return ({**payload, "duration_s": 1.0, "intent_id": "", "notes": "", **names},
                body["stamp_s"] * 10**9)

    items = [result(body, attempt_id=f"att-{i}") for i, body in enumerate(originals)]
    for body in amendments:
        of = originals[body["of"]] if body["of"] < len(originals) else originals[0]
        fixed = {**of, "success": body["success"], "failure_reason": body["failure_reason"],
                 "stamp_s": body["stamp_s"]}
        if body["mismatch"]:
            fixed["zone"] = "elsewhere"
        payload, stamp = result(fixed, amends=f"att-{body['of']}")
        items.append(({**payload, "notes": body["notes"]}, stamp))
    items += [result(body) for body in plain]
    return items


def run(url: str, items, cuts, rollup=RollupShape()) -> str:
    """Append the results in this order with a pass before each cut and one at the end;
    the facts' snapshot (a second pass changes nothing; the replay is the same)."""
    store = MemoryStore(url, rollup=rollup)
    part = store.partition(IDENT)
    for index, (payload, stamp) in enumerate(items):
        if index in cuts:
            consolidation_pass(part, CONFIG)
        part.append("execution_result", payload, stamp)
    consolidation_pass(part, CONFIG)
    assert consolidation_pass(part, CONFIG).facts_touched == 0
    snapshot = facts_snapshot(part)
    assert replay_snapshot(part, CONFIG) == snapshot
    assert oracle_consolidation.replay_snapshot(part, CONFIG) == snapshot
    with store.read() as conn:
        states = without_event_ids(part.all_consolidation_states(conn))
    store.close()
    return snapshot, states


def without_event_ids(states):
    """The states but their newest supporting event ids: the passes between the results
    append run events, which take ids (provenance, not knowledge)."""
    return [(*row[:-1], re.sub(r'"last_event_id":[0-9]+', '"last_event_id":0', row[-1]))
            for row in states]


def check(urls, scenario_drawn, seed, cuts, rollup):
    """The same facts in the order drawn in one pass, cut into passes, and shuffled and
    cut; the same states too (`verify --full` re-derives them in one pass) in one order
    however it is cut."""
    items = payloads(*scenario_drawn)
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    first, states = run(urls[0], items, set(), rollup)
    assert run(urls[1], items, cuts, rollup) == (first, states)
    assert run(urls[2], shuffled, cuts, rollup)[0] == first


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn=scenario, seed=st.integers(0, 10**6), cuts=st.sets(st.integers(0, 18), max_size=5),
       rollup=st.sampled_from([RollupShape(block=3, bucket_ns=10 * 10**9), RollupShape()]))
def test_an_amended_attempt_counts_once_whatever_the_order_and_the_cut_on_sqlite(
        drawn, seed, cuts, rollup):
    with tempfile.TemporaryDirectory() as folder:
        check([f"sqlite:///{folder}/{name}.db" for name in ("one", "cut", "shuffled")], drawn,
              seed, cuts, rollup)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn=scenario, seed=st.integers(0, 10**6), cuts=st.sets(st.integers(0, 18), max_size=4))
def test_an_amended_attempt_counts_once_whatever_the_order_and_the_cut_on_postgresql(
        pg_server, drawn, seed, cuts):
    check([pg_server.new_database() for _ in range(3)], drawn, seed, cuts,
          RollupShape(block=3, bucket_ns=10 * 10**9))


def _result(success, reason="", stamp_s=100, **names):
    return ({"skill_id": "manipulation.grasp", "target_class": "cup", "environment": "sim",
             "zone": "", "success": success, "failure_reason": reason,
             "parameters": {"force_n": 5.0}, "observations": {}, "duration_s": 1.0,
             "intent_id": "", "notes": "", **names}, stamp_s * 10**9)


def _skill_fact(part):
    [fact] = [f for f in json.loads(facts_snapshot(part)) if f["kind"] == "skill_success_rate"]
    return fact


def test_success_then_a_late_failure_counts_one_failed_attempt(tmp_path):
    store = MemoryStore(f"sqlite:///{tmp_path}/s.db")
    part = store.partition(IDENT)
    part.append("execution_result", *_result(True, attempt_id="grasp-1"))
    consolidation_pass(part, CONFIG)
    assert _skill_fact(part)["value"]["successes"] == 1
    part.append("execution_result", *_result(False, "dropped", 160, amends="grasp-1"))
    report = consolidation_pass(part, CONFIG)
    assert (report.events_read, report.skipped) == (1, {"amendment:applied": 1})
    fact = _skill_fact(part)
    assert (fact["n_observations"], fact["value"]["successes"]) == (1, 0)
    assert fact["value"]["failure_reasons"] == {"dropped": 1}
    assert fact["value"]["recommended_parameters"] == {}
    # The same counts as if the attempt had reported its failure at once.
    other = MemoryStore(f"sqlite:///{tmp_path}/t.db").partition(IDENT)
    other.append("execution_result", *_result(False, "dropped"))
    consolidation_pass(other, CONFIG)
    assert _skill_fact(other)["value"] == fact["value"]


def test_an_amendment_by_event_id_and_what_becomes_of_each_is_counted(tmp_path):
    store = MemoryStore(f"sqlite:///{tmp_path}/s.db")
    part = store.partition(IDENT)
    original = part.append("execution_result", *_result(True))
    by_event = _result(False, "slipped", 150, amends=f"event:{original.id}")
    part.append("execution_result", *by_event)
    part.append("execution_result", *_result(False, "slipped", 120, amends="event:999999"))
    part.append("execution_result", *_result(True, "", 130, amends="later-1"))
    wrong = dict(_result(False, "collision", 170, amends=f"event:{original.id}")[0],
                 environment="lab")
    part.append("execution_result", wrong, 170 * 10**9)
    report = consolidation_pass(part, CONFIG)
    assert {k: v for k, v in report.skipped.items() if k.startswith("amendment")} == {
        "amendment:applied": 1, "amendment:held": 1, "amendment:refused:mismatch": 1,
        "amendment:refused:unknown_event": 1}
    assert report.events_read == 5
    fact = _skill_fact(part)
    assert (fact["n_observations"], fact["value"]["failure_reasons"]) == (1, {"slipped": 1})
    # The held amendment's attempt arrives: it counts once, with the held outcome.
    part.append("execution_result", *_result(False, "collision", 110, attempt_id="later-1"))
    report = consolidation_pass(part, CONFIG)
    assert report.skipped.get("amendment:applied") is None  # none in this range
    fact = _skill_fact(part)
    assert (fact["n_observations"], fact["value"]["successes"]) == (2, 1)
    assert oracle_consolidation.replay_snapshot(part, CONFIG) == facts_snapshot(part)


def test_rules_v1_count_an_amended_attempt_once_too(tmp_path):
    config = RulesConfig(rule_version=RULE_VERSION)
    urls = [f"sqlite:///{tmp_path}/{name}.db" for name in ("a", "b")]
    items = [_result(False, "slipped", 100, attempt_id="x"),
             _result(True, "", 200, amends="x"), _result(False, "slipped", 90)]
    snapshots = []
    for url, order in zip(urls, (items, items[::-1])):
        part = MemoryStore(url).partition(IDENT)
        for payload, stamp in order:
            part.append("execution_result", payload, stamp)
            consolidation_pass(part, config)
        snapshots.append(facts_snapshot(part))
        assert oracle_consolidation.replay_snapshot(part, config) == snapshots[-1]
    assert snapshots[0] == snapshots[1]
    facts = {f["kind"]: f for f in json.loads(snapshots[0])}
    assert facts["skill_success_rate"]["value"]["successes"] == 1
    assert facts["interaction_pattern"]["value"]["count"] == 1


def test_explain_shows_the_attempt_and_its_amendment(tmp_path):
    part = MemoryStore(f"sqlite:///{tmp_path}/s.db").partition(IDENT)
    original = part.append("execution_result", *_result(True, attempt_id="grasp-7"))
    consolidation_pass(part, CONFIG)
    late = part.append("execution_result", *_result(False, "dropped", 160, amends="grasp-7"))
    consolidation_pass(part, CONFIG)
    for kind, key in (("skill_success_rate", "manipulation.grasp + cup + sim"),
                      ("interaction_pattern", "manipulation.grasp + cup + dropped")):
        explained = explain_fact(part, find_fact(part, kind=kind, key=key))
        support = explained["supporting_events"]
        assert (support["count"], support["outcomes"]) == (1, {"success": 0, "failure": 1})
        assert support["event_ids"] == [original.id]
        assert support["amended"] == [{"event_id": original.id, "amended_by": late.id,
                                       "from": "success", "to": "failure (dropped)"}]
        assert (f"attempt event {original.id} amended by event {late.id}: success -> "
                "failure (dropped)") in format_explanation(explained)


def test_after_a_reset_an_amendment_of_an_attempt_before_it_counts_nothing(tmp_path):
    part = MemoryStore(f"sqlite:///{tmp_path}/s.db").partition(IDENT)
    part.append("execution_result", *_result(True, attempt_id="before-reset"))
    consolidation_pass(part, CONFIG)
    record_reset(part, "ops", "start over", 120 * 10**9, tmp_path / "archive.json")
    part.append("execution_result", *_result(False, "dropped", 160, amends="before-reset"))
    part.append("execution_result", *_result(True, "", 170))
    consolidation_pass(part, CONFIG)
    fact = _skill_fact(part)
    assert (fact["n_observations"], fact["value"]["successes"]) == (1, 1)
    assert replay_snapshot(part, CONFIG) == facts_snapshot(part)
    assert oracle_consolidation.replay_snapshot(part, CONFIG) == facts_snapshot(part)


def test_an_amendment_of_an_attempt_compaction_removed_still_counts(tmp_path):
    part = MemoryStore(f"sqlite:///{tmp_path}/s.db").partition(IDENT)
    plain = part.append("execution_result", *_result(True, "", 90))
    part.append("execution_result", *_result(True, attempt_id="old-1"))
    consolidation_pass(part, CONFIG)
    report = compact(part, compactable_until(part), tmp_path / "segments", stamp_ns=10**11)
    assert report.compaction and part.count_events("execution_result") == 0
    part.append("execution_result", *_result(False, "dropped", 160, amends="old-1"))
    # A result without an attempt_id, never amended before it was compacted, is no more.
    by_event = _result(False, "dropped", 165, amends=f"event:{plain.id}")
    part.append("execution_result", *by_event)
    report = consolidation_pass(part, CONFIG)
    assert report.skipped == {"amendment:applied": 1, "amendment:refused:unknown_event": 1}
    fact = _skill_fact(part)
    assert (fact["n_observations"], fact["value"]["successes"]) == (2, 1)
    assert fact["value"]["failure_reasons"] == {"dropped": 1}

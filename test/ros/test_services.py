"""The consolidate and explain services, the event-count trigger and facts_delta."""

import time

from robot_memory.msg import SemanticFactArray
from robot_memory.ros.qos import FACTS_DELTA_QOS, FACTS_QOS
from robot_memory.srv import Consolidate, ExplainFact

from ros.conftest import BOTH_PROCESS_MODES, wait_until

KEY = "manipulation.grasp + glass_cup + sim_relaxed"


def stored_results(probe, n):
    probe.wait_identity()
    probe.wait_logger()
    for i in range(n):
        probe.publish_result(stamp_s=10 + i, success=i % 4 != 0,
                             failure_reason="" if i % 4 else "slipped")


def rate_facts(probe):
    return [f for snapshot in probe.facts for f in snapshot.facts
            if f.kind == "skill_success_rate"]


def test_consolidate_service_previews_then_applies(probe, start_stack):
    start_stack(period_s=3600.0, pass_after_new_events=0)
    deltas = []
    probe.create_subscription(SemanticFactArray, "facts_delta", deltas.append, FACTS_DELTA_QOS)
    stored_results(probe, 8)

    def dry_run():
        return probe.call(Consolidate, "consolidate", Consolidate.Request(dry_run=True))
    preview = wait_until(lambda: (r := dry_run()).events_read == 8 and r, 20,
                         "all 8 results stored")
    assert preview.success and preview.run_event_id == 0
    assert f"+ skill_success_rate [{KEY}] active: n=8" in preview.diff
    assert "dry run, nothing written" in preview.diff
    assert rate_facts(probe) == []  # a preview publishes nothing

    applied = probe.call_signed(Consolidate, "consolidate", Consolidate.Request(dry_run=False))
    assert applied.success and applied.run_event_id > 0 and applied.facts_touched >= 2
    assert "[applied]" in applied.diff
    probe.wait_fact(lambda f: f.key == KEY and f.n_observations == 8)
    wait_until(lambda: deltas, 10, "a per-pass delta on facts_delta")
    assert {f.kind for f in deltas[-1].facts} >= {"skill_success_rate", "interaction_pattern"}

    again = probe.call_signed(Consolidate, "consolidate", Consolidate.Request(dry_run=False))
    assert (again.events_read, again.facts_touched, again.run_event_id) == (0, 0, 0)
    # The label says what was asked for and what came of it.
    assert "[nothing new to consolidate, nothing written]" in again.diff
    assert "dry run" not in again.diff
    idle_preview = probe.call(Consolidate, "consolidate", Consolidate.Request(dry_run=True))
    assert "[dry run, nothing written: nothing new to consolidate]" in idle_preview.diff


@BOTH_PROCESS_MODES
def test_a_late_facts_subscriber_gets_the_facts_of_the_last_pass(probe, start_stack):
    """Passes that ran while `facts` had no subscriber left its latched snapshot behind
    (the one of activation); a subscriber that comes later is sent the current one."""
    start_stack(period_s=3600.0, pass_after_new_events=0)
    stored_results(probe, 8)
    topic = f"/{probe.namespace}/facts"
    for subscription in [s for s in probe.subscriptions if s.topic_name == topic]:
        probe.destroy_subscription(subscription)
    wait_until(lambda: probe.count_subscribers(topic) == 0, 10, "no subscriber on facts")
    time.sleep(0.5)  # the consolidator's side of the graph catches up too

    def apply():
        return probe.call_signed(Consolidate, "consolidate", Consolidate.Request(dry_run=False))
    applied = wait_until(lambda: (r := apply()).events_read and r, 20,
                         "a pass over the stored results")
    assert applied.success and applied.events_read == 8

    late: list[SemanticFactArray] = []
    probe.create_subscription(SemanticFactArray, "facts", late.append, FACTS_QOS)
    wait_until(lambda: late and late[-1].run_event_id == applied.run_event_id, 20,
               lambda: f"the snapshot of run {applied.run_event_id} "
                       f"(got runs {[m.run_event_id for m in late]})")
    assert [f.n_observations for f in late[-1].facts if f.key == KEY] == [8]


def test_pass_runs_after_enough_new_events(probe, start_stack):
    start_stack(period_s=3600.0, pass_after_new_events=10, new_event_poll_period_s=0.1)
    stored_results(probe, 10)
    probe.wait_fact(lambda f: f.key == KEY and f.n_observations == 10, timeout=20)


def test_explain_service_shows_support_and_consultations(probe, start_stack):
    start_stack(period_s=0.3)
    stored_results(probe, 12)
    fact = probe.wait_fact(lambda f: f.key == KEY and f.n_observations == 12)
    wait_until(lambda: probe.grounding.query("manipulation.grasp", "glass_cup", "sim_relaxed",
                                             intent_id="place-cup-7").ok, 20,
               "grounding to serve the fact")

    def explained():
        response = probe.call(ExplainFact, "explain", ExplainFact.Request(fact_id=fact.fact_id))
        return response if "place-cup-7" in response.explanation_text else None
    response = wait_until(explained, 15, "the consultation in the explanation")
    assert response.found and response.fact.key == KEY
    assert "supported by 12 execution results: 9 successes, 3 failures" in \
        response.explanation_text

    missing = probe.call(ExplainFact, "explain",
                         ExplainFact.Request(kind="skill_success_rate", key="nothing"))
    assert not missing.found and "no fact" in missing.reason


def test_grounding_catches_up_after_a_pass_run_outside_the_node(probe, start_stack, db_url,
                                                                certified_hash):
    """A pass the node did not run (the CLI's) breaks the delta chain: the server must
    notice at the next delta and reload, not serve without that pass's facts."""
    import subprocess
    import sys
    start_stack(period_s=3600.0, pass_after_new_events=0)
    stored_results(probe, 6)
    cli = [sys.executable, "-m", "robot_memory.cli", "consolidate", "--apply", "--db", db_url,
           "--identity", certified_hash]
    wait_until(lambda: "read 6 events" in subprocess.run(cli, capture_output=True,
                                                         text=True).stdout, 20,
               "the CLI pass over 6 stored results")
    for i in range(4):
        probe.publish_result(stamp_s=100 + i, target_class="mug")
    wait_until(lambda: probe.call_signed(Consolidate, "consolidate",
                                         Consolidate.Request(dry_run=False)).events_read == 4,
               20, "the node's pass over the mug results")
    for target, n in (("glass_cup", 6), ("mug", 4)):
        answer = wait_until(lambda t=target: (a := probe.grounding.query(
            "manipulation.grasp", t, "sim_relaxed", fact_kinds=["skill_success_rate"])).ok
            and a, 10, f"grounding on {target}")
        assert answer.facts[0].n_observations == n


def test_grounding_server_shows_all_its_services_and_topics(probe, start_stack):
    """What `ros2 node info /grounding_server` lists: everything on the one node."""
    start_stack()
    namespace = f"/{probe.namespace}"

    def graph():
        try:
            return (dict(probe.get_service_names_and_types_by_node("grounding_server",
                                                                   namespace)),
                    dict(probe.get_subscriber_names_and_types_by_node("grounding_server",
                                                                      namespace)),
                    dict(probe.get_publisher_names_and_types_by_node("grounding_server",
                                                                     namespace)))
        except Exception:  # not discovered yet
            return None

    def discovered(g) -> bool:  # entities are discovered one by one: wait for all
        return (f"{namespace}/ground" in g[0] and f"{namespace}/explain" in g[0]
                and f"{namespace}/facts_delta" in g[1] and "/diagnostics" in g[2])

    services, subscriptions, publishers = wait_until(
        lambda: (g := graph()) and discovered(g) and g, 30,
        lambda: f"grounding_server's entities in the graph: {graph()}")
    assert services[f"{namespace}/ground"] == ["robot_memory/srv/GroundingQuery"]
    assert services[f"{namespace}/explain"] == ["robot_memory/srv/ExplainFact"]
    assert subscriptions[f"{namespace}/facts_delta"] == ["robot_memory/msg/SemanticFactArray"]
    assert publishers["/diagnostics"] == ["diagnostic_msgs/msg/DiagnosticArray"]
    assert [name for name, ns in probe.get_node_names_and_namespaces()
            if ns == namespace and "grounding" in name] == ["grounding_server"]
    # The side thread runs them: diagnostics arrive and explain answers.
    wait_until(lambda: "answers" in probe.diagnostics.get("grounding_server", {}), 20,
               "grounding_server's diagnostics")
    explained = probe.call(ExplainFact, "explain", ExplainFact.Request(fact_id=1))
    assert not explained.found and explained.reason


def test_between_passes_the_consolidator_folds_a_long_write_ahead_log_back(
        probe, start_stack, db_url, certified_hash):
    """With passes far apart, the log the logger's commits grow is copied back by the
    consolidator once it is past SQLite's auto-checkpoint size, not by those commits."""
    import os

    from robot_memory.consolidation.service import CHECKPOINT_LOG_BYTES
    from robot_memory.store import MemoryStore, NewEvent
    start_stack(period_s=3600.0, pass_after_new_events=10**8)  # no pass comes
    probe.wait_identity()
    probe.wait_logger()
    wal = db_url.removeprefix("sqlite:///") + "-wal"
    # Another writer of the store, whose commits do not copy the log back either.
    writer = MemoryStore(db_url, keep_open=True).partition(certified_hash)
    written = 0
    while written < 20 and os.path.getsize(wal) <= CHECKPOINT_LOG_BYTES:
        writer.append_many([NewEvent("note", {"text": "x" * 2000, "i": i}, 10**9 + i)
                            for i in range(written * 1000, written * 1000 + 1000)])
        written += 1
    assert os.path.getsize(wal) > CHECKPOINT_LOG_BYTES
    wait_until(lambda: os.path.getsize(wal) < CHECKPOINT_LOG_BYTES, 10,
               lambda: f"the log folded back ({os.path.getsize(wal)} bytes)")
    writer.store.close()

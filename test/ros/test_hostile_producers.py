"""What producers send cannot cost the logger what it keeps or block what comes after:
oversized results are refused from their byte count and leave no memory behind,
malformed samples cost only themselves, a wrong clock only its own results, and every
service refuses an oversized request with a reason. Real node processes over DDS."""

import json
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
from rclpy.serialization import serialize_message

from robot_memory.consolidation import EXECUTION_RESULT
from robot_memory.event_kinds import FACT_CONSULTATION
from robot_memory.msg import ExecutionResult, SemanticFactArray
from robot_memory.intake.receipt import SENT_STAMP
from robot_memory.wire.execution_result import MAX_RESULT_BYTES
from robot_memory.ros.matching import wait_for_subscriber
from robot_memory.ros.qos import FACTS_DELTA_QOS
from robot_memory.srv import ExplainFact, GroundingQuery, Override, RecordEvent
from robot_memory.store import MemoryStore

from ros.conftest import wait_until
from ros.test_cdr_crashes import CRASHING

MB = 1024 * 1024
BIG_NOTES = "x" * 1_600_000  # serialized: about 1.6 MB, 30x the largest valid result
# Two ways 40 refused 1.6 MB results among 400 valid ones kept up to 64 MB: each refusal
# held its sample until the cyclic collector ran, and Fast DDS's reader pool kept every
# slot as large as the largest sample it had held (ros/middleware.py).
RSS_MARGIN_MB = 24


def rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / MB


def logger_counts(probe):
    return probe.diagnostics.get("episodic_logger", {})


def wait_count(probe, key: str, value: int, timeout: float = 30.0):
    return wait_until(lambda: logger_counts(probe).get(key) == str(value), timeout,
                      lambda: f"{key} == {value}: {logger_counts(probe)}")


def test_oversized_results_are_refused_counted_and_leave_no_memory(probe, start_stack,
                                                                   certified_hash, db_url):
    stack = start_stack()
    probe.wait_identity()
    probe.wait_logger()
    pid = stack.process_of("episodic_logger").pid
    for _ in range(5):  # the reader's pool takes its size from the first ones
        probe.publish_result(stamp_s=1, notes=BIG_NOTES)
    wait_count(probe, "rejected.oversized", 5)
    before = rss_mb(pid)
    for i in range(40):  # among valid results, as a skill stuck in a loop sends them
        for j in range(10):
            probe.publish_result(stamp_s=1000 + i * 10 + j, intent_id=f"valid-{i}-{j}")
        probe.publish_result(stamp_s=2 + i, notes=BIG_NOTES)
        time.sleep(0.05)
    diag = wait_count(probe, "rejected.oversized", 45)
    after = rss_mb(pid)
    assert after - before < RSS_MARGIN_MB, f"logger RSS {before:.1f} -> {after:.1f} MB"
    probe.publish_result(stamp_s=100, intent_id="after the flood")
    part = MemoryStore(db_url).partition(certified_hash)
    wait_until(lambda: part.count_events(EXECUTION_RESULT) == 401, 20, "the valid results")
    assert "more than the %d of the largest valid result" % MAX_RESULT_BYTES \
        in stack.log_path.read_text(errors="replace")
    assert diag is not None


def malformed(rng: random.Random, valid: bytes) -> bytes:
    how = rng.choice(["random", "flipped", "truncated"])
    if how == "random":
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300)))
    if how == "truncated":
        return valid[:rng.randint(0, len(valid) - 5)]
    flipped = bytearray(valid)
    for _ in range(rng.randint(1, 8)):
        flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
    return bytes(flipped)


def test_malformed_samples_cost_only_themselves(probe, start_stack, certified_hash, db_url):
    """Random, flipped and truncated CDR between valid results, in one stream: every
    valid result is stored in order, every other sample is counted (a flipped bit may
    still make a valid result, which is then stored and counted as accepted)."""
    start_stack()
    probe.wait_identity()
    probe.wait_logger()
    rng = random.Random(37)
    template = ExecutionResult(skill_id="manipulation.grasp", target_class="cup",
                               success=True, intent_id="template")
    template.header.stamp.sec = 7
    valid_bytes = serialize_message(template)
    sent_valid, sent = [], 0
    for i in range(300):
        if i % 4 == 0:
            probe.publish_result(stamp_s=10 + i, intent_id=f"valid-{i}")
            sent_valid.append(f"valid-{i}")
        else:
            probe.results.publish(malformed(rng, valid_bytes))
        sent += 1
    part = MemoryStore(db_url).partition(certified_hash)

    def stored_valid():
        return [e.payload["intent_id"] for e in part.events([EXECUTION_RESULT])
                if e.payload["intent_id"].startswith("valid-")]
    wait_until(lambda: stored_valid() == sent_valid, 30,
               lambda: f"{len(sent_valid)} valid results, have {len(stored_valid())}")

    def all_counted():
        d = logger_counts(probe)
        return d and int(d["accepted"]) + int(d["rejected_total"]) == sent and d
    diag = wait_until(all_counted, 30, lambda: f"{sent} counted: {logger_counts(probe)}")
    assert int(diag["rejected.malformed"]) > 100
    assert diag["lost_total"] == "0"


def test_bytes_that_crash_rclpys_deserializer_cost_only_themselves(probe, start_stack,
                                                                   certified_hash, db_url):
    """Samples that end a process in rclpy's deserializer (test_cdr_crashes.py), published
    raw on the results topic among valid results: refused as malformed, unread by rclpy;
    the logger stays up, and stores the results sent before and after them."""
    stack = start_stack()
    probe.wait_identity()
    probe.wait_logger()
    logger = stack.process_of("episodic_logger")
    sent = []
    for round_ in range(2):
        for i in range(3):
            probe.publish_result(stamp_s=10 + 10 * round_ + i, intent_id=f"valid-{round_}-{i}")
            sent.append(f"valid-{round_}-{i}")
        for data in CRASHING.values():
            probe.results.publish(data)
    probe.publish_result(stamp_s=30, intent_id="after")
    sent.append("after")
    part = MemoryStore(db_url).partition(certified_hash)
    wait_until(lambda: [e.payload["intent_id"] for e in part.events([EXECUTION_RESULT])]
               == sent, 30, lambda: f"the {len(sent)} valid results stored in order")
    wait_count(probe, "rejected.malformed", 2 * len(CRASHING))
    assert logger_counts(probe)["lost_total"] == "0"
    assert logger.poll() is None and stack.process_of("episodic_logger") is logger
    assert "header.stamp.sec: its int32 at byte 4, past the end (4)" in \
        stack.log_path.read_text(errors="replace")


def test_a_result_stamped_years_ahead_is_stored_at_its_receipt_and_counted(
        probe, start_stack, certified_hash, db_url):
    start_stack()
    probe.wait_identity()
    probe.wait_logger()
    probe.publish_result(stamp_s=2_130_000_000, intent_id="from 2037")  # an unset RTC
    part = MemoryStore(db_url).partition(certified_hash)
    [event] = wait_until(lambda: list(part.events([EXECUTION_RESULT])), 20, "the result")
    assert event.payload[SENT_STAMP] == 2_130_000_000 * 10**9
    assert event.stamp_ns == event.payload["received_ns"] < 2_130_000_000 * 10**9
    wait_count(probe, "clock_skew", 1)
    level, message = probe.statuses["episodic_logger"]
    assert level == 1 and "clock_skew" in message


def test_every_service_refuses_an_oversized_request_with_a_reason(
        probe, start_stack, certified_hash, db_url):
    stack = start_stack()
    probe.wait_identity()
    probe.wait_logger()
    huge = "y" * 1_000_000
    pids = {node: stack.process_of(node).pid
            for node in ("episodic_logger", "grounding_server", "consolidator")}

    def ask_all():
        answers = {}
        request = RecordEvent.Request()
        request.result.skill_id, request.result.notes = "manipulation.grasp", huge
        answers["record_event"] = probe.call(RecordEvent, "record_event", request)
        answers["ground"] = probe.call(GroundingQuery, "ground", GroundingQuery.Request(
            skill_id="manipulation.grasp", requester=huge))
        answers["explain"] = probe.call(ExplainFact, "explain",
                                        ExplainFact.Request(kind="skill_success_rate",
                                                            key=huge))
        answers["override"] = probe.call(Override, "override", Override.Request(
            action=Override.Request.ACTION_FREEZE, operator_name="alice", reason=huge))
        return answers

    def all_active() -> bool:  # the verifier activates the three nodes in turn
        return all(node in probe.statuses and
                   not probe.statuses[node][1].startswith("inactive") for node in pids)
    wait_until(all_active, 30, lambda: f"every node active: {probe.statuses}")
    first = ask_all()
    assert not first["record_event"].accepted
    assert first["record_event"].reason.startswith("notes: 1000000 characters")
    assert first["ground"].status == GroundingQuery.Response.INVALID_REQUEST
    assert first["ground"].reason == "requester: 1000000 characters, more than 256"
    assert not first["explain"].found
    assert first["explain"].reason.startswith("refused: key: 1000000 characters")
    assert not first["override"].success
    assert first["override"].reason.startswith("refused: reason: 1000000 characters")
    before = {node: rss_mb(pid) for node, pid in pids.items()}
    for _ in range(20):
        ask_all()
    after = {node: rss_mb(pid) for node, pid in pids.items()}
    for node in pids:
        assert after[node] - before[node] < RSS_MARGIN_MB, (node, before[node], after[node])
    part = MemoryStore(db_url).partition(certified_hash)
    consultations = wait_until(
        lambda: (found := list(part.events([FACT_CONSULTATION]))) and len(found) == 21
        and found, 20, "21 consultations audited")
    assert {c.payload["requester"] for c in consultations} == \
        {"(1000000 characters, over the limit)"}  # audited, by its length
    wait_until(lambda: probe.diagnostics.get("grounding_server", {}).get(
        "refused_requests") == "42", 20, "ground and explain refusals counted")
    wait_until(lambda: probe.diagnostics.get("consolidator", {}).get(
        "refused_requests") == "21", 20, "override refusals counted")
    wait_count(probe, "rejected.oversized", 21)
    assert part.count_events(EXECUTION_RESULT) == 0


HELD = 8000  # Fast DDS's default reader bound is 5,000 samples; the profile's 100,000
BURST_PUBLISHER = """
import sys
import time
import rclpy
from rclpy.duration import Duration
from robot_memory.msg import ExecutionResult
from robot_memory.ros.matching import wait_for_subscriber
from robot_memory.ros.qos import EXECUTION_RESULTS_QOS
rclpy.init()
node = rclpy.create_node("burst_publisher")
publisher = node.create_publisher(ExecutionResult, sys.argv[1], EXECUTION_RESULTS_QOS)
print("ready", flush=True)
sys.stdin.readline()
assert wait_for_subscriber(publisher, 30.0)
for i in range(int(sys.argv[2])):  # 2,000/s: acks keep up, the writer overwrites nothing
    publisher.publish(ExecutionResult(skill_id="manipulation.grasp", target_class="cup"))
    if i % 200 == 199:
        time.sleep(0.1)
print(publisher.wait_for_all_acked(Duration(seconds=30)), flush=True)
"""


def test_a_reader_that_falls_behind_loses_nothing_within_its_bound(namespace):
    """A burst the logger cannot take at once waits in its reader's history (the node
    processes' Fast DDS profile), not in the publishers': with Fast DDS's default bound,
    the publisher's KEEP_LAST history overwrote the results past it. Both in processes
    of their own, as a skill and the logger are."""
    topic = "/" + "/".join(filter(None, (namespace.strip("/"), "held_results")))
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
    publisher = subprocess.Popen([sys.executable, "-c", BURST_PUBLISHER, topic, str(HELD)],
                                 **pipes)
    reader = None
    try:
        assert publisher.stdout.readline().strip() == "ready"  # the writer exists
        reader = subprocess.Popen([sys.executable,
                                   str(Path(__file__).with_name("held_reader.py")),
                                   topic, str(HELD)], **pipes)
        assert reader.stdout.readline().strip() == "ready"  # ... and the reader matched it
        publisher.stdin.write("go\n")
        publisher.stdin.flush()
        assert publisher.stdout.readline().strip() == "True"  # every result acknowledged
        reader.stdin.write("go\n")
        reader.stdin.flush()
        seen = json.loads(reader.stdout.readline())
    finally:
        for process in (publisher, reader):
            if process is not None:
                process.kill()
                process.wait()
    assert seen == {"received": HELD, "lost": 0}


BURST = 6000
FAST_PUBLISHER = """
import sys
import rclpy
from rclpy.duration import Duration
from robot_memory.msg import ExecutionResult
from robot_memory.ros.matching import wait_for_subscriber
from robot_memory.ros.qos import EXECUTION_RESULTS_QOS
rclpy.init()
node = rclpy.create_node("fast_publisher")
publisher = node.create_publisher(ExecutionResult, sys.argv[1], EXECUTION_RESULTS_QOS)
messages = [ExecutionResult(skill_id="manipulation.grasp", target_class="cup",
                            environment="sim_relaxed", success=True, intent_id=f"burst-{i}")
            for i in range(int(sys.argv[2]))]
for msg in messages:
    msg.header.stamp.sec = 50
assert wait_for_subscriber(publisher, 30.0)
print("ready", flush=True)
sys.stdin.readline()
for msg in messages:  # as fast as Python publishes: several thousand a second
    publisher.publish(msg)
print(publisher.wait_for_all_acked(Duration(seconds=60)), flush=True)
"""
# What a burst of BURST results, arriving while the writer is stalled, may add to the
# logger's RSS: all but logger_intake.HOLD_AT_MOST of them wait in its reader as DDS
# bytes (about 0.55 KB each) rather than in Python (about 2.5 KB each, validated and
# queued). Held in Python up to 5,000 at once, the same burst added 17-20 MB.
BURST_MARGIN_MB = 10


def test_a_burst_while_the_writer_stalls_waits_in_the_reader_and_is_all_stored(
        probe, start_stack, certified_hash, db_url, namespace):
    """A skill sends BURST results at once while another connection holds the store's
    write lock for 3 s (a long transaction of the consolidator, say): the logger's memory
    grows by less than BURST_MARGIN_MB over the burst and the drain, and every result is
    stored, none lost."""
    stack = start_stack()
    probe.wait_identity()
    probe.wait_logger()
    pid = stack.process_of("episodic_logger").pid
    part = MemoryStore(db_url).partition(certified_hash)
    for i in range(300):  # the write path warmed up, as in a running logger
        probe.publish_result(stamp_s=10 + i, intent_id=f"warm-{i}")
    wait_until(lambda: part.count_events(EXECUTION_RESULT) == 300, 30, "the warm-up")
    topic = f"/{namespace}/execution_results"
    publisher = subprocess.Popen([sys.executable, "-c", FAST_PUBLISHER, topic, str(BURST)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    lock = sqlite3.connect(db_url.removeprefix("sqlite:///"), timeout=30)
    try:
        assert publisher.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        before = rss_mb(pid)
        lock.execute("BEGIN IMMEDIATE")  # the writer waits: the burst has to be held
        publisher.stdin.write("go\n")
        publisher.stdin.flush()
        peak, locked_until = before, time.monotonic() + 3.0
        while time.monotonic() < locked_until:
            peak = max(peak, rss_mb(pid))
            time.sleep(0.05)
        lock.rollback()
        deadline = time.monotonic() + 40.0
        while part.count_events(EXECUTION_RESULT) < 300 + BURST and \
                time.monotonic() < deadline:
            peak = max(peak, rss_mb(pid))
            time.sleep(0.05)
        assert publisher.stdout.readline().strip() == "True"  # all acknowledged
    finally:
        lock.close()
        publisher.kill()
        publisher.wait()
    stored = [e.payload["intent_id"] for e in part.events([EXECUTION_RESULT])
              if e.payload["intent_id"].startswith("burst-")]
    missing = {f"burst-{i}" for i in range(BURST)} - set(stored)
    assert len(stored) == BURST and not missing, (len(stored), sorted(missing)[:5])
    wait_count(probe, "written", 300 + BURST)
    assert logger_counts(probe)["lost_total"] == "0"
    assert peak - before < BURST_MARGIN_MB, f"logger RSS {before:.1f} -> {peak:.1f} MB"


def test_a_malformed_facts_delta_is_counted_and_the_index_keeps_following_passes(
        probe, start_stack):
    """facts_delta is read from its bytes: a sample that is no SemanticFactArray (another
    node's bug, a hostile publisher; bytes that crash rclpy's deserializer among them) is
    refused and counted, and the deltas of the real passes keep reaching the index."""
    start_stack(period_s=0.3)
    probe.wait_identity()
    probe.wait_logger()
    for i in range(6):
        probe.publish_result(stamp_s=10 + i)

    def served_n():
        answer = probe.grounding.query("manipulation.grasp", "glass_cup", "sim_relaxed",
                                       fact_kinds=["skill_success_rate"])
        return answer.facts[0].n_observations if answer.ok else 0
    wait_until(lambda: served_n() == 6, 30, "the fact of 6 results served")
    deltas = []
    probe.create_subscription(SemanticFactArray, "facts_delta", deltas.append,
                              FACTS_DELTA_QOS, raw=True)
    hostile = probe.create_publisher(SemanticFactArray, "facts_delta", FACTS_DELTA_QOS)
    assert wait_for_subscriber(hostile, 20)
    probe.publish_result(stamp_s=20)
    real = wait_until(lambda: deltas and deltas[-1], 20, "a real delta's bytes")
    refused = [real[:cut] for cut in (5, 40, len(real) // 2, len(real) - 9)]
    refused += CRASHING.values()  # bytes that end a process in rclpy's deserializer
    for data in refused:  # paced: the reader keeps the last 10 (FACTS_DELTA_QOS)
        hostile.publish(data)
        time.sleep(0.05)
    wait_until(lambda: probe.diagnostics.get("grounding_server", {}).get(
        "refused_deltas") == str(len(refused)), 20,
        f"the {len(refused)} cut or crashing deltas refused and counted")
    for i in range(3):
        probe.publish_result(stamp_s=30 + i)
    wait_until(lambda: served_n() == 10, 30, "the next passes' facts served")

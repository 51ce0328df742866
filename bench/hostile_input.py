"""Hostile producers: the sidecar's memory, its log and `ground` while peers abuse it.

In each process mode in turn (four node processes, then all four in one), the stack runs
on a small consolidated store (bench.stores) while a helper publishes valid results at
--valid-rate (each distinct: intent_id hv-<n>, stamped now) and a planner calls `ground`
at --ground-rate, timing each round trip. After --baseline-seconds the abuse starts, from
processes of its own, beside the same valid stream and calls, for --seconds:
- results of ~1.6 MB serialized (the logger refuses them unread: oversized);
- bytes that do not deserialize as an ExecutionResult, published raw: random bytes, bit
  flips and truncations of valid serializations (malformed; only bytes that rclpy itself
  cannot deserialize are sent, so each one must be refused);
- a std_msgs/String publisher on execution_results (DDS never delivers it: the logger
  must name it in unheard_publishers);
- results with a secret in their notes, one category after another (privacy_<category>);
- results stamped in 2037 (stored at their receipt time, counted as clock_skew);
- once, a burst of --burst-rate valid results for --burst-seconds (counted as valid);
- `ground` (1 MB skill_id), `explain` (1 MB key), `record_event` (1.6 MB notes) and
  `override` (1 MB reason) requests.
Each helper counts what it sent by category. Once the logger has written everything, the
counts are compared: valid results stored (read from the store, by intent_id) against
sent, refusals by cause (the logger's /diagnostics, the services' refused_requests)
against sent. The RSS of every sidecar process is sampled every 0.5 s in both phases.

Goals: each process's max RSS under abuse <= 1.25x its max in the baseline phase; every
valid result stored; every refusal counted under its cause; ground p99 under abuse <=
1.5x the baseline's. This process only orchestrates; the helpers are this module's
`peer` commands (python -m bench.hostile_input peer ROLE ...), each its own process.

    python -m bench.hostile_input [--seconds 600] [--baseline-seconds 120]
                                  [--modes four_processes,one_process]
                                  [--out bench/results/hostile_input.json]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from bench.grounding_latency import isolate_ros_traffic, nodes_log, stop_helper
from bench.ingest import read_json, settle, store_counter
from bench.sidecar_memory import SAMPLE_PERIOD_S, rss_mb
from bench.stats import RESULTS, summary_ms, write_result
from bench.stores import IDENTITY, MANIFEST, KeySpace, cached_store, working_copy
from robot_memory.operation.bringup import Stack
from robot_memory.retention.archives import history_events
from robot_memory.retention.compaction import default_archive_dir
from robot_memory.event_kinds import EXECUTION_RESULT, PRIVACY_REJECTION
from robot_memory.intake.receipt import SENT_STAMP
from robot_memory.store import MemoryStore

MODES = {"four_processes": False, "one_process": True}
RSS_GOAL, P99_GOAL = 1.25, 1.5

# intent_id prefixes: what a stored result was sent as.
VALID, BURST, SKEWED = "hv", "hb", "hs"
SECRET, OVERSIZED, MALFORMED, RECORDED = "hp", "ho", "hm", "hr"
OVERSIZED_NOTES = 1_600_000  # characters: ~1.6 MB serialized, ~32x MAX_RESULT_BYTES
OVERSIZED_FIELD = 1_000_000  # characters of a service request's oversized text field
SKEW_T0_NS = 2_114_380_800 * 10**9  # 2037-01-01 UTC: years ahead of any robot's clock
# Notes that the privacy boundary refuses, by the category it must give.
SECRETS = {"password": "operator login password=hunter2",
           "api_key": "aws key AKIAIOSFODNN7EXAMPLE in the config",
           "email": "report to jane.doe@example.com",
           "phone_number": "call the lab on +1 415 555 0123",
           "jwt": "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib3QifQ.c2lnbmF0dXJl",
           "private_key": "-----BEGIN RSA PRIVATE KEY-----"}
WRONG_TYPE_NODE = "bench_hostile_wrong_type"
LOGGER, GROUNDING, CONSOLIDATOR = "/episodic_logger", "/grounding_server", "/consolidator"
# rosidl's C typesupport prints this to stderr for a sequence count past the bytes:
# one line per such malformed sample, outside the logger's log throttle.
TYPESUPPORT_LINE = "sequence size exceeds remaining buffer"

MATCH_TIMEOUT_S = 180.0  # the stack boots while the helpers wait for it
CALL_TIMEOUT_S = 10.0
ACK_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 90.0


# -- the helpers (`peer` commands), each in its own process ----------------------------

class Control:
    """Words from the orchestrator on stdin: `go` starts the work, `stop` (or the pipe
    closing: the orchestrator is gone) ends it."""

    def __init__(self):
        self.go, self.stop = threading.Event(), threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            if line.strip() == "go":
                self.go.set()
            elif line.strip() == "stop":
                break
        self.go.set()  # stopped before it started: nothing left to wait for
        self.stop.set()


def run_schedule(streams: dict[str, tuple[float, Callable[[int], None]]],
                 stop: threading.Event, limit: int | None = None) -> tuple[Counter, Counter]:
    """Call each stream's action (given its running count) at the stream's rate, on a
    fixed schedule (not sleep-after-send, so rates do not drift; a late action is not
    skipped but caught up), until `stop` or each stream has made `limit` attempts.
    Returns (done, failed) by stream: an action that raised was not sent. A stream at
    rate 0 is off."""
    import rclpy
    started = time.monotonic()
    attempts, done, failed = Counter(), Counter(), Counter()
    due = {name: started for name, (rate, _) in streams.items() if rate > 0}
    if not due:  # all off: idle until told, like a peer that has work
        stop.wait()
    while due and not stop.is_set() and rclpy.ok():
        name = min(due, key=due.get)
        wait = due[name] - time.monotonic()
        if wait > 0 and stop.wait(wait):
            break
        rate, action = streams[name]
        try:
            action(attempts[name])
            done[name] += 1
        except Exception as exc:  # e.g. publish timing out on a full history: say it
            failed[name] += 1
            if failed[name] == 1:
                print(f"{name}: {exc!r}", file=sys.stderr, flush=True)
        attempts[name] += 1
        due[name] = started + attempts[name] / rate
        if limit is not None and attempts[name] >= limit:
            del due[name]
    return done, failed


def ros_node(name: str):
    import rclpy
    rclpy.init()
    return rclpy.create_node(name)


class Spinning:
    """The node's callbacks (service responses) served on a thread of their own until
    close(), which shuts the context down first and joins the thread: destroying what
    a wait in progress uses aborts the process."""

    def __init__(self, node):
        from rclpy.executors import SingleThreadedExecutor
        self.node, self.executor = node, SingleThreadedExecutor()
        self.executor.add_node(node)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException
        try:
            self.executor.spin()
        except ExternalShutdownException:  # close(), or Ctrl-C
            pass

    def close(self) -> None:
        import rclpy
        rclpy.try_shutdown()
        self.thread.join(10.0)
        self.node.destroy_node()


def result_publisher(node):
    """A publisher with the profile producers are told to use, once the logger's reader
    has matched it (a volatile topic drops what is published before the match)."""
    from robot_memory.msg import ExecutionResult
    from robot_memory.ros.qos import EXECUTION_RESULTS_QOS
    publisher = node.create_publisher(ExecutionResult, "execution_results",
                                      EXECUTION_RESULTS_QOS)
    deadline = time.monotonic() + MATCH_TIMEOUT_S
    while publisher.get_subscription_count() < 1:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no subscriber matched within {MATCH_TIMEOUT_S} s")
        time.sleep(0.05)
    time.sleep(1.0)  # both sides of the match settled (see robot_memory.ros.matching)
    return publisher


def valid_result(n: int, tag: str, keys: KeySpace, stamp_ns: int | None = None):
    """A valid result on the store's own key space (bench.load_publisher), distinct by
    its intent_id `<tag>-<n>`, stamped now unless told."""
    from bench.load_publisher import result_message
    from robot_memory.ros.conversions import ns_to_stamp
    msg = result_message(n, keys)
    msg.intent_id = f"{tag}-{n}"
    msg.header.stamp = ns_to_stamp(time.time_ns() if stamp_ns is None else stamp_ns)
    return msg


def finish(node, publishers, summary: dict) -> None:
    """Wait until every subscriber acknowledged what was published (reliable: a sample
    still in flight when the process goes is lost to the count), then report."""
    from rclpy.duration import Duration
    summary["all_acked"] = all(p.wait_for_all_acked(Duration(seconds=ACK_TIMEOUT_S))
                               for p in publishers)
    print(json.dumps(summary), flush=True)
    node.destroy_node()


def valid_peer(args) -> None:
    """Valid results at --rate from `go` to `stop` (the steady stream), or --count of them
    at --rate once (the burst, prepared before `go` so that Python keeps up)."""
    node, control = ros_node(f"bench_hostile_{args.tag}"), Control()
    publisher, keys = result_publisher(node), KeySpace.for_facts(args.facts)
    if args.count:
        from robot_memory.ros.conversions import ns_to_stamp
        messages = [valid_result(n, args.tag, keys) for n in range(args.count)]

        def publish(n: int) -> None:
            messages[n].header.stamp = ns_to_stamp(time.time_ns())
            publisher.publish(messages[n])
    else:
        def publish(n: int) -> None:
            publisher.publish(valid_result(n, args.tag, keys))
    print("ready", flush=True)
    control.go.wait()
    started = time.monotonic()
    done, failed = run_schedule({args.tag: (args.rate, publish)}, control.stop,
                                limit=args.count or None)
    seconds = time.monotonic() - started
    finish(node, [publisher], {"sent": done[args.tag], "failed": failed[args.tag],
                               "seconds": round(seconds, 3),
                               "rate_per_s": round(done[args.tag] / max(seconds, 1e-9), 1)})


def malformed_bytes(rng: random.Random, valid: bytes) -> tuple[str, bytes]:
    """(kind, bytes) that rclpy cannot deserialize as an ExecutionResult: the same judge
    the logger falls back on, so each one sent must be counted as malformed."""
    from rclpy.serialization import deserialize_message

    from robot_memory.msg import ExecutionResult
    while True:
        kind = rng.choice(("random", "random_after_cdr_header", "bit_flips", "truncated"))
        if kind == "random":
            data = rng.randbytes(rng.randint(1, 512))
        elif kind == "random_after_cdr_header":  # past the reader's encapsulation check
            data = b"\x00\x01\x00\x00" + rng.randbytes(rng.randint(1, 512))
        elif kind == "bit_flips":
            flipped = bytearray(valid)
            for _ in range(rng.randint(1, 8)):
                bit = rng.randrange(len(flipped) * 8)
                flipped[bit // 8] ^= 1 << (bit % 8)
            data = bytes(flipped)
        else:
            data = valid[:rng.randrange(1, len(valid))]
        try:  # as the reader gets them: DDS pads a payload with zeros to 4 bytes
            deserialize_message(data + bytes(-len(data) % 4), ExecutionResult)
        except Exception:  # what we want: bytes that do not deserialize
            return kind, data


def hostile_peer(args) -> None:
    """From `go` to `stop`: oversized results, malformed bytes, secrets and skewed
    stamps, each at its rate; the counts by category at the end."""
    from rclpy.serialization import serialize_message
    node, control = ros_node("bench_hostile_topics"), Control()
    publisher, keys = result_publisher(node), KeySpace.for_facts(args.facts)
    rng = random.Random(args.seed)
    oversized = []  # serialized once: the helper's CPU goes to sending them
    for i, char in enumerate("xyzw"):
        msg = valid_result(i, OVERSIZED, keys)
        msg.notes = char * OVERSIZED_NOTES
        oversized.append(serialize_message(msg))
    categories = list(SECRETS)
    sent: dict[str, Counter] = {"malformed": Counter(), "secrets": Counter()}
    print("ready", flush=True)
    control.go.wait()

    def malformed(n: int) -> None:
        kind, data = malformed_bytes(rng, serialize_message(valid_result(n, MALFORMED, keys)))
        publisher.publish(data)  # bytes: published as they are, unserialized
        sent["malformed"][kind] += 1

    def secret(n: int) -> None:
        category = categories[n % len(categories)]
        msg = valid_result(n, SECRET, keys)
        msg.notes = SECRETS[category]
        publisher.publish(msg)
        sent["secrets"][category] += 1

    streams = {
        "oversized": (args.oversized_rate,
                      lambda n: publisher.publish(oversized[n % len(oversized)])),
        "malformed": (args.malformed_rate, malformed),
        "secret": (args.secret_rate, secret),
        "skewed": (args.skewed_rate, lambda n: publisher.publish(
            valid_result(n, SKEWED, keys, stamp_ns=SKEW_T0_NS + n * 1_000_000))),
    }
    done, failed = run_schedule(streams, control.stop)
    finish(node, [publisher], {"sent": dict(done), "failed": dict(failed),
                               "malformed_by_kind": dict(sent["malformed"]),
                               "secrets_by_category": dict(sent["secrets"])})


def wrong_type_peer(args) -> None:
    """From `go` to `stop`: std_msgs/String on execution_results at --rate. A process of
    its own: DDS refuses a second type on one topic within a process."""
    from std_msgs.msg import String
    node, control = ros_node(WRONG_TYPE_NODE), Control()
    print("ready", flush=True)
    control.go.wait()
    publisher = node.create_publisher(String, "execution_results", 10)  # unheard from now
    done, failed = run_schedule(
        {"wrong_type": (args.rate, lambda n: publisher.publish(String(data=f"not a result {n}")))},
        control.stop)
    print(json.dumps({"sent": done["wrong_type"], "failed": failed["wrong_type"]}), flush=True)
    node.destroy_node()


def services_peer(args) -> None:
    """From `go` to `stop`, each service in turn at --rate: a request with one text field
    far over its limit; each answer sorted as refused or not (or timed out)."""
    from bench.grounding_client import call
    from robot_memory.msg import ExecutionResult
    from robot_memory.srv import ExplainFact, GroundingQuery, Override, RecordEvent
    node, control = ros_node("bench_hostile_services"), Control()
    spinning = Spinning(node)
    big = "s" * OVERSIZED_FIELD
    asks = {  # service: (type, request, is the answer a refusal?)
        "ground": (GroundingQuery, GroundingQuery.Request(
            skill_id=big, requester="bench_hostile_services"),
            lambda r: r.status == GroundingQuery.Response.INVALID_REQUEST),
        "explain": (ExplainFact, ExplainFact.Request(kind="skill_success_rate", key=big),
                    lambda r: not r.found and r.reason.startswith("refused")),
        "record_event": (RecordEvent, RecordEvent.Request(result=ExecutionResult(
            skill_id="manipulation.grasp", intent_id=f"{RECORDED}-0",
            notes="r" * OVERSIZED_NOTES)),
            lambda r: not r.accepted and r.reason_code == RecordEvent.Response.REASON_INVALID),
        "override": (Override, Override.Request(
            action=Override.Request.ACTION_INVALIDATE, operator_name="bench", reason=big,
            kind="skill_success_rate", key="manipulation.grasp"),
            lambda r: not r.success and r.reason.startswith("refused")),
    }
    answers: dict[str, Counter] = {name: Counter() for name in asks}
    streams = {}
    for name, (kind, request, refused) in asks.items():
        client = node.create_client(kind, name)
        if not client.wait_for_service(timeout_sec=MATCH_TIMEOUT_S):
            raise TimeoutError(f"service {name} not found within {MATCH_TIMEOUT_S} s")

        def ask(_n: int, name=name, client=client, request=request, refused=refused) -> None:
            try:
                _, response = call(client, request, timeout_s=CALL_TIMEOUT_S)
            except TimeoutError:  # sent all the same: the server may still count it
                answers[name]["timeout"] += 1
                return
            answers[name]["refused" if refused(response) else "not_refused"] += 1
        streams[name] = (args.rate, ask)
    print("ready", flush=True)
    control.go.wait()
    done, failed = run_schedule(streams, control.stop)
    print(json.dumps({"sent": dict(done), "failed": dict(failed),
                      "answers": {name: dict(c) for name, c in answers.items()}}), flush=True)
    spinning.close()


def ground_peer(args) -> None:
    """The planner: `ground` at --rate from `go` to `stop`, each round trip timed
    (bench.grounding_client.call); (monotonic start, seconds or None, status) to --out."""
    from bench.grounding_client import STATUS_NAMES, call, connect, wait_until_serving
    from robot_memory.srv import GroundingQuery
    node, control = ros_node("bench_hostile_planner"), Control()
    spinning = Spinning(node)
    ground = connect(node, "ground")
    skill, target, environment = KeySpace.for_facts(args.facts).request_key()
    request = GroundingQuery.Request(skill_id=skill, target_class=target,
                                     environment=environment,
                                     requester="bench_hostile_planner", intent_id="bench")
    wait_until_serving(ground, request)
    print("ready", flush=True)
    control.go.wait()
    samples = []

    def ask(_n: int) -> None:
        started = time.monotonic()
        try:
            elapsed, response = call(ground, request, timeout_s=CALL_TIMEOUT_S)
        except TimeoutError:
            samples.append((started, None, "TIMEOUT"))
            return
        samples.append((started, elapsed, STATUS_NAMES.get(response.status,
                                                           str(response.status))))

    run_schedule({"ground": (args.rate, ask)}, control.stop)
    Path(args.out).write_text(json.dumps(samples))
    print(json.dumps({"calls": len(samples)}), flush=True)
    spinning.close()


def watch_peer(args) -> None:
    """Keeps the newest /diagnostics status of the logger, the grounding server and the
    consolidator, and every publisher the logger ever named unheard; writes them to
    --out every 0.2 s until stopped."""
    import os

    from diagnostic_msgs.msg import DiagnosticArray

    from robot_memory.ros.qos import DIAGNOSTICS_QOS
    node = ros_node("bench_hostile_watch")
    statuses: dict[str, dict] = {}
    unheard_seen: dict[str, str] = {}  # the logger lists only those unheard now

    def on_diagnostics(msg) -> None:
        for status in msg.status:
            if status.hardware_id in (LOGGER, GROUNDING, CONSOLIDATOR):
                values = {kv.key: kv.value for kv in status.values}
                statuses[status.hardware_id] = {"level": int(status.level[0]),
                                                "message": status.message, "values": values,
                                                "at": time.monotonic()}
                if status.hardware_id == LOGGER:
                    for key, why in values.items():
                        if key.startswith("unheard."):
                            unheard_seen.setdefault(key.removeprefix("unheard."), why)

    def dump() -> None:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as handle:
            json.dump({"statuses": statuses, "unheard_seen": unheard_seen}, handle)
        os.replace(tmp, args.out)

    node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, DIAGNOSTICS_QOS)
    node.create_timer(0.2, dump)
    spinning = Spinning(node)
    try:
        while spinning.thread.is_alive():  # until Ctrl-C (stop_helper) ends the spin
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        spinning.close()


PEERS = {"valid": valid_peer, "hostile": hostile_peer, "wrong_type": wrong_type_peer,
         "services": services_peer, "ground": ground_peer, "watch": watch_peer}


def peer_main(argv: list[str]) -> None:
    import rclpy
    from rclpy.executors import ExternalShutdownException
    parser = argparse.ArgumentParser(prog="python -m bench.hostile_input peer")
    parser.add_argument("role", choices=sorted(PEERS))
    parser.add_argument("--rate", type=float, default=1.0)
    parser.add_argument("--count", type=int, default=0, help="valid: this many, then end")
    parser.add_argument("--tag", default=VALID)
    parser.add_argument("--facts", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out")
    for stream in ("oversized", "malformed", "secret", "skewed"):
        parser.add_argument(f"--{stream}-rate", type=float, default=1.0)
    args = parser.parse_args(argv)
    try:
        PEERS[args.role](args)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        rclpy.try_shutdown()


# -- the orchestrator ------------------------------------------------------------------

def start_peer(role: str, *args: str, log) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bench.hostile_input", "peer", role,
                             *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=log, text=True)


def expect_ready(name: str, process: subprocess.Popen) -> None:
    line = process.stdout.readline().strip()  # each peer gives up on its own timeouts
    if line != "ready":
        raise RuntimeError(f"helper {name} said {line!r} (exit code {process.poll()}); "
                           "see the helpers' log below")


def tell(process: subprocess.Popen, word: str) -> None:
    try:
        process.stdin.write(word + "\n")
        process.stdin.flush()
    except BrokenPipeError:  # it has ended already (the burst ends by itself)
        pass


def stop_peer(name: str, process: subprocess.Popen) -> dict:
    """`stop`, then its JSON summary (the last line it prints before exiting)."""
    try:
        out, _ = process.communicate("stop\n", timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        stop_helper(process)
        raise RuntimeError(f"helper {name} did not stop within {STOP_TIMEOUT_S} s")
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"helper {name} ended without a summary (exit code "
                           f"{process.returncode})")
    return json.loads(lines[-1])


class RssSeries:
    """RSS of every sidecar process every SAMPLE_PERIOD_S, from the start of the baseline
    (t = 0); also watches that no sidecar process or helper has ended meanwhile."""

    def __init__(self, stack: Stack, helpers: dict[str, subprocess.Popen]):
        self.stack, self.helpers = stack, helpers
        self.t0 = time.monotonic()
        self.t_s: list[float] = []
        self.mb: dict[str, list[float]] = {name: [] for name in stack.processes}

    def until(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.stack.exited():
                raise RuntimeError(f"sidecar process(es) exited: {self.stack.exited()}")
            ended = {name: p.returncode for name, p in self.helpers.items()
                     if p.poll() is not None}
            if ended:
                raise RuntimeError(f"helper(s) ended early: {ended}")
            self.t_s.append(round(time.monotonic() - self.t0, 2))
            for name, process in self.stack.processes.items():
                self.mb[name].append(round(rss_mb(process.pid), 1))
            time.sleep(max(0.0, min(SAMPLE_PERIOD_S, deadline - time.monotonic())))

    def max_by_phase(self, boundary_s: float) -> dict[str, dict]:
        out = {}
        for name, values in self.mb.items():
            baseline = max(v for t, v in zip(self.t_s, values) if t < boundary_s)
            hostile = max(v for t, v in zip(self.t_s, values) if t >= boundary_s)
            out[name] = {"baseline_mb": baseline, "hostile_mb": hostile,
                         "hostile_over_baseline": round(hostile / baseline, 3)}
        return out


def logger_values(watch_file: Path, hardware_id: str = LOGGER) -> dict:
    return read_json(watch_file).get("statuses", {}).get(hardware_id, {}).get("values", {})


def wait_until_written(watch_file: Path, count_stored) -> dict:
    """Until the logger's counts and the store have stopped moving (three of its
    diagnostics periods) with nothing pending; its last counts."""
    def read():
        values = logger_values(watch_file)
        return (values.get("written"), values.get("rejected_total"),
                values.get("clock_skew"), values.get("pending"), count_stored())

    started = time.monotonic()
    while True:
        (_, _, _, pending, _), _ = settle(read, quiet_s=3.0, timeout_s=120.0)
        if pending == "0" or time.monotonic() - started > 180.0:
            break
    return {"pending": pending, "seconds": round(time.monotonic() - started, 1)}


def stored_since(url: str, after_seq: int) -> dict:
    """What the log gained: execution results by intent_id prefix (distinct ids, and how
    many carry the producer's stamp beside the receipt time), privacy_rejection events."""
    store = MemoryStore(url)
    try:
        partition = store.partition(IDENTITY)
        ids: dict[str, set] = {}
        events, moved = Counter(), Counter()
        # Across the consolidator's retention compactions: what they moved into segments
        # was stored too.
        archive = default_archive_dir(url)
        for event in history_events(partition, archive, [EXECUTION_RESULT], after_seq):
            intent = event.payload.get("intent_id", "")
            prefix = intent.split("-")[0] if "-" in intent else "(other)"
            events[prefix] += 1
            ids.setdefault(prefix, set()).add(intent)
            if SENT_STAMP in event.payload:
                moved[prefix] += 1
        privacy = sum(1 for _ in history_events(partition, archive, [PRIVACY_REJECTION],
                                                after_seq))
    finally:
        store.close()
    return {"events": dict(events), "distinct": {p: len(s) for p, s in ids.items()},
            "stored_at_receipt": dict(moved), "privacy_rejection_events": privacy}


def ground_phases(samples: list, boundary: float, end: float) -> dict:
    """Round trips of each phase (by the monotonic time each call started)."""
    out = {}
    for phase, (start, stop) in (("baseline", (-float("inf"), boundary)),
                                 ("hostile", (boundary, end))):
        chosen = [s for s in samples if start <= s[0] < stop]
        answered = [s[1] for s in chosen if s[1] is not None]
        out[phase] = {**(summary_ms(answered) if answered else {"n": 0}),
                      "statuses": dict(Counter(s[2] for s in chosen))}
    if out["baseline"].get("p99_ms") and out["hostile"].get("p99_ms"):
        out["p50_ratio"] = round(out["hostile"]["p50_ms"] / out["baseline"]["p50_ms"], 3)
        out["p99_ratio"] = round(out["hostile"]["p99_ms"] / out["baseline"]["p99_ms"], 3)
    return out


def refusal_checks(sent: dict, counted: dict, stored: dict, services: dict,
                   diagnostics: dict) -> dict:
    """Each cause: what was sent to be refused for it vs. what the sidecar counted."""
    logger, grounding = diagnostics[LOGGER], diagnostics[GROUNDING]
    secrets = sent["hostile"]["secrets_by_category"]
    skewed = sent["hostile"]["sent"].get("skewed", 0)
    checks = {
        "oversized": {"sent": sent["hostile"]["sent"].get("oversized", 0)
                      + services["sent"].get("record_event", 0),
                      "counted": counted.get("oversized", 0)},
        "malformed": {"sent": sent["hostile"]["sent"].get("malformed", 0),
                      "counted": counted.get("malformed", 0)},
        **{f"privacy_{c}": {"sent": n, "counted": counted.get(f"privacy_{c}", 0)}
           for c, n in secrets.items()},
        "privacy_rejection_events": {"sent": sum(secrets.values()),
                                     "counted": stored["privacy_rejection_events"]},
        "clock_skew": {"sent": skewed, "counted": int(logger.get("clock_skew", -1))},
        "skewed_stored_at_receipt": {"sent": skewed, "counted": stored["stored_at_receipt"]
                                     .get(SKEWED, 0)},
        "ground_and_explain_refused_requests": {
            "sent": services["sent"].get("ground", 0) + services["sent"].get("explain", 0),
            "counted": int(grounding.get("refused_requests", -1))},
        "override_refused_requests": {
            "sent": services["sent"].get("override", 0),
            "counted": int(diagnostics[CONSOLIDATOR].get("refused_requests", -1))},
    }
    for check in checks.values():
        check["equal"] = check["sent"] == check["counted"]
    return checks


def measure_mode(mode: str, url: str, args, scratch: Path, stack_log, peer_log) -> dict:
    store = MemoryStore(url)
    start_seq = store.partition(IDENTITY).head()[0]
    store.close()
    stack = Stack({"database_url": url, "manifest_path": str(MANIFEST),
                   "certified_hash": IDENTITY, "period_s": 1.0,
                   "verify_store_on_boot": False, "full_check_after_boot": False,
                   # Some 10^5 results per mode: past the default growth guard.
                   "growth_limit_mb": 0.0, "hard_limit_mb": 0.0},
                  log_level="warn", one_process=MODES[mode]).start(stdout=stack_log,
                                                                   stderr=stack_log)
    watch_file, ground_file = scratch / f"{mode}_watch.json", scratch / f"{mode}_ground.json"
    facts = ("--facts", str(args.facts))
    peers = {}
    try:
        peers["watch"] = start_peer("watch", "--out", str(watch_file), log=peer_log)
        peers["ground"] = start_peer("ground", "--rate", str(args.ground_rate), "--out",
                                     str(ground_file), *facts, log=peer_log)
        peers["valid"] = start_peer("valid", "--rate", str(args.valid_rate), *facts,
                                    log=peer_log)
        peers["hostile"] = start_peer(
            "hostile", *facts, "--seed", str(args.seed), "--oversized-rate",
            str(args.oversized_rate), "--malformed-rate", str(args.malformed_rate),
            "--secret-rate", str(args.secret_rate), "--skewed-rate", str(args.skewed_rate),
            log=peer_log)
        peers["wrong_type"] = start_peer("wrong_type", "--rate", str(args.wrong_type_rate),
                                         log=peer_log)
        peers["services"] = start_peer("services", "--rate", str(args.service_rate),
                                       log=peer_log)
        peers["burst"] = start_peer("valid", "--tag", BURST, "--rate", str(args.burst_rate),
                                    "--count", str(int(args.burst_rate * args.burst_seconds)),
                                    *facts, log=peer_log)
        for name, process in peers.items():
            if name != "watch":
                expect_ready(name, process)
        print(f"  {mode}: baseline for {args.baseline_seconds} s", flush=True)
        rss = RssSeries(stack, {n: p for n, p in peers.items() if n != "burst"})
        tell(peers["valid"], "go")
        tell(peers["ground"], "go")
        rss.until(rss.t0 + args.baseline_seconds)
        boundary = time.monotonic()
        print(f"  {mode}: hostile for {args.seconds} s", flush=True)
        for name in ("hostile", "wrong_type", "services"):
            tell(peers[name], "go")
        rss.until(boundary + args.burst_after * args.seconds)
        burst_start = time.monotonic()
        tell(peers["burst"], "go")
        rss.until(boundary + args.seconds)
        end = time.monotonic()
        sent = {name: stop_peer(name, peers[name])
                for name in ("hostile", "wrong_type", "services", "valid", "burst")}
        stop_peer("ground", peers["ground"])
        # A peer that crashed on its way out (after its summary) would hide here.
        exit_codes = {name: peers[name].returncode for name in (*sent, "ground")}
        drained = wait_until_written(watch_file, store_counter(url))
        diagnostics = {h: logger_values(watch_file, h) for h in (LOGGER, GROUNDING,
                                                                  CONSOLIDATOR)}
        unheard_seen = read_json(watch_file).get("unheard_seen", {})
        if stack.exited():
            raise RuntimeError(f"sidecar process(es) exited: {stack.exited()}")
    finally:
        for process in peers.values():
            stop_helper(process)
        stack.stop()
    stored = stored_since(url, start_seq)
    samples = json.loads(ground_file.read_text())
    return {**summarize(sent, stored, diagnostics, unheard_seen, rss, boundary, burst_start,
                        end, samples, drained), "helper_exit_codes": exit_codes}


def summarize(sent, stored, diagnostics, unheard_seen, rss: RssSeries, boundary: float,
              burst_start: float, end: float, samples: list, drained: dict) -> dict:
    logger = diagnostics[LOGGER]
    counted = {k.removeprefix("rejected."): int(v) for k, v in logger.items()
               if k.startswith("rejected.")}
    valid_sent = sent["valid"]["sent"] + sent["burst"]["sent"]
    valid_stored = stored["events"].get(VALID, 0) + stored["events"].get(BURST, 0)
    valid_distinct = stored["distinct"].get(VALID, 0) + stored["distinct"].get(BURST, 0)
    checks = refusal_checks(sent, counted, stored, sent["services"], diagnostics)
    unheard_named = sorted(w for w in unheard_seen if WRONG_TYPE_NODE in w)
    expected_causes = {"oversized", "malformed", *(f"privacy_{c}" for c in SECRETS)}
    boundary_s = round(boundary - rss.t0, 2)
    rss_max = rss.max_by_phase(boundary_s)
    ground = ground_phases(samples, boundary, end)
    not_refused = {name: {k: v for k, v in a.items() if k != "refused"}
                   for name, a in sent["services"]["answers"].items()}
    return {
        "rss": {"period_s": SAMPLE_PERIOD_S, "phase_boundary_s": boundary_s,
                "burst_start_s": round(burst_start - rss.t0, 2), "t_s": rss.t_s,
                "mb": rss.mb},
        "rss_max_by_phase": rss_max,
        "sent": sent,
        "stored": {**stored, "valid_sent": valid_sent, "valid_stored": valid_stored,
                   "valid_distinct": valid_distinct},
        "refusals": {"counted_by_cause": counted, "checks": checks,
                     "other_causes": {c: n for c, n in counted.items()
                                      if c not in expected_causes},
                     "services_not_refused": {n: a for n, a in not_refused.items() if a},
                     "wrong_type": {"sent": sent["wrong_type"]["sent"],
                                    "reported_unheard_as": unheard_named}},
        "unheard_publishers_seen": unheard_seen,
        "ground": ground,
        "logger_diagnostics_at_end": logger,
        "grounding_diagnostics_at_end": diagnostics[GROUNDING],
        "consolidator_diagnostics_at_end": diagnostics[CONSOLIDATOR],
        "drain": drained,
        "goals": {
            "rss_within_1_25x": all(p["hostile_over_baseline"] <= RSS_GOAL
                                    for p in rss_max.values()),
            "every_valid_result_stored": (valid_stored == valid_distinct == valid_sent
                                          and not sent["valid"]["failed"]
                                          and not sent["burst"]["failed"]),
            "every_refusal_counted": (all(c["equal"] for c in checks.values())
                                      and bool(unheard_named)
                                      and not any(stored["events"].get(p) for p in
                                                  (SECRET, OVERSIZED, MALFORMED, RECORDED))),
            "ground_p99_within_1_5x": ground.get("p99_ratio", float("inf")) <= P99_GOAL,
        },
    }


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")  # no display: a file only
    import matplotlib.pyplot as plt
    modes = [m for m in MODES if m in result["modes"]]
    fig, axes = plt.subplots(len(modes), 1, figsize=(10, 3.5 * len(modes)), squeeze=False)
    for ax, mode in zip(axes[:, 0], modes):
        rss = result["modes"][mode]["rss"]
        for name, values in rss["mb"].items():
            ax.plot(rss["t_s"], values, label=name, linewidth=1)
        ax.axvline(rss["phase_boundary_s"], color="black", linestyle="--",
                   label="hostile phase starts")
        ax.axvline(rss["burst_start_s"], color="grey", linestyle=":", label="burst")
        ax.set_title(f"{mode}: RSS per sidecar process")
        ax.set_xlabel("seconds since the baseline phase started")
        ax.set_ylabel("RSS (MB)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize="small", loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run(args) -> dict:
    cached = cached_store(args.events, args.facts)
    modes = {}
    with tempfile.TemporaryDirectory(prefix="bench_hostile_") as scratch:
        scratch = Path(scratch)
        with nodes_log(scratch / "stack.log") as stack_log, \
                nodes_log(scratch / "helpers.log") as peer_log:
            for mode in args.modes.split(","):
                (scratch / mode).mkdir()
                url = working_copy(cached, scratch / mode)
                lines_before = (scratch / "stack.log").read_text(errors="replace") \
                    .count(TYPESUPPORT_LINE)
                modes[mode] = measure_mode(mode, url, args, scratch, stack_log, peer_log)
                stack_log.flush()
                modes[mode]["typesupport_stderr_lines"] = (scratch / "stack.log").read_text(
                    errors="replace").count(TYPESUPPORT_LINE) - lines_before
    goals = {goal: all(m["goals"][goal] for m in modes.values())
             for goal in next(iter(modes.values()))["goals"]}
    return {"events": args.events, "facts_requested": args.facts,
            "baseline_seconds": args.baseline_seconds, "hostile_seconds": args.seconds,
            "rates_per_s": {"valid": args.valid_rate, "ground": args.ground_rate,
                            "oversized": args.oversized_rate,
                            "malformed": args.malformed_rate, "secret": args.secret_rate,
                            "skewed": args.skewed_rate, "wrong_type": args.wrong_type_rate,
                            "each_service": args.service_rate, "burst": args.burst_rate},
            "burst_seconds": args.burst_seconds, "goal_rss_ratio": RSS_GOAL,
            "goal_ground_p99_ratio": P99_GOAL, "modes": modes, "goals": goals}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="the hostile phase")
    parser.add_argument("--baseline-seconds", type=float, default=120.0)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--events", type=int, default=20_000, help="results in the store")
    parser.add_argument("--facts", type=int, default=1000)
    parser.add_argument("--valid-rate", type=float, default=200.0)
    parser.add_argument("--ground-rate", type=float, default=20.0)
    parser.add_argument("--oversized-rate", type=float, default=3.0)
    parser.add_argument("--malformed-rate", type=float, default=20.0)
    parser.add_argument("--secret-rate", type=float, default=3.0)
    parser.add_argument("--skewed-rate", type=float, default=3.0)
    parser.add_argument("--wrong-type-rate", type=float, default=5.0)
    parser.add_argument("--service-rate", type=float, default=1.0,
                        help="oversized requests per second to each of the four services")
    parser.add_argument("--burst-rate", type=float, default=5000.0)
    parser.add_argument("--burst-seconds", type=float, default=3.0)
    parser.add_argument("--burst-after", type=float, default=1 / 3,
                        help="the burst starts this fraction into the hostile phase")
    parser.add_argument("--seed", type=int, default=0, help="of the malformed bytes")
    parser.add_argument("--out")
    args = parser.parse_args()
    unknown = set(args.modes.split(",")) - set(MODES)
    if unknown:
        parser.error(f"unknown mode(s) {sorted(unknown)}; choose from {list(MODES)}")
    return args


def main() -> None:
    if sys.argv[1:2] == ["peer"]:
        peer_main(sys.argv[2:])
        return
    args = parse_args()
    isolate_ros_traffic()
    started = time.monotonic()
    result = run(args)
    result["wall_seconds"] = round(time.monotonic() - started, 1)
    path = write_result("hostile_input", result, args.out)
    figure = path.with_suffix(".png") if args.out else RESULTS / "hostile_input.png"
    plot(result, figure)
    for mode, m in result["modes"].items():
        stored, ground = m["stored"], m["ground"]
        print(f"{mode}: valid stored {stored['valid_stored']} of {stored['valid_sent']} sent; "
              f"ground p99 {ground['baseline'].get('p99_ms')} -> "
              f"{ground['hostile'].get('p99_ms')} ms")
        for name, v in m["rss_max_by_phase"].items():
            print(f"  {name:18} max RSS {v['baseline_mb']} -> {v['hostile_mb']} MB "
                  f"(x{v['hostile_over_baseline']})")
        for cause, check in m["refusals"]["checks"].items():
            print(f"  {cause:36} sent {check['sent']:6} counted {check['counted']:6}"
                  f"{'' if check['equal'] else '  MISMATCH'}")
        print(f"  unheard publishers seen: {sorted(m['unheard_publishers_seen'])}")
    print(json.dumps(result["goals"], indent=2))
    print(f"wrote {path} and {figure} ({result['wall_seconds']} s)")


if __name__ == "__main__":
    main()

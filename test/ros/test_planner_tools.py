"""Memory for planners against real stacks over DDS: `robot-memory mcp` driven by the MCP
SDK's own client over stdio (every tool, a stack that is down, an identity that is not
verified), and the py_trees leaf ticked in a real tree (OK, ABSTAIN, a stack that is
down).

One verified stack for the module (the demo's 16 grasps, consolidated), one whose
certified hash is wrong (MISMATCH), and a namespace where nothing runs."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import time

import anyio
import psutil
import py_trees
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from conftest import OPERATOR_KEYS, Probe, wait_until
from robot_memory.cli import main as cli_main
from robot_memory.demo.run_demo import attempt_results
from robot_memory.demo.scenario import ENVIRONMENT, SKILL, TARGET
from robot_memory.manifest import load_manifest
from robot_memory.msg import IdentityStatus
from robot_memory.operation.bringup import Stack
from robot_memory.planners.answers import render_ground
from robot_memory.planners.mcp_server import TOOL_NAMES
from robot_memory.ros.bt_ground import GroundBehaviour
from robot_memory.ros.mcp_tools import fact_dict
from robot_memory.store import MemoryStore

pytestmark = pytest.mark.ros

MANIFEST = os.path.join(os.path.dirname(__file__), "..", "..", "robot_memory", "config",
                        "example_manifest.yaml")
UNKNOWN_TARGET = "glass_jar"
INTENT = "mcp-intent-1"


def _start(tmp, namespace: str, certified_hash: str) -> Stack:
    db_url = f"sqlite:///{tmp / 'memory.db'}"
    log = open(tmp / "stack.log", "ab")
    stack = Stack({"database_url": db_url, "manifest_path": MANIFEST,
                   "certified_hash": certified_hash, "period_s": 0.5,
                   "diagnostics_period_s": 0.2, "operator_keys": OPERATOR_KEYS},
                  namespace=namespace)
    stack.start(stdout=log, stderr=log)
    stack.db_url, stack.log = db_url, log
    return stack


@pytest.fixture(scope="module")
def stacks(tmp_path_factory, ros_executor):
    """{"ok": (stack, probe), "bad": (stack, probe)}: both started at once."""
    certified = load_manifest(MANIFEST).identity_hash()
    started = {}
    for name, certified_hash in (("ok", certified), ("bad", "0" * 64)):
        namespace = f"planners_{name}_{os.getpid()}"
        stack = _start(tmp_path_factory.mktemp(name), namespace, certified_hash)
        probe = Probe(namespace)
        ros_executor.add_node(probe)
        started[name] = (stack, probe)
    try:
        stack, probe = started["ok"]
        assert probe.wait_identity(60).state == IdentityStatus.VERIFIED
        probe.wait_logger(60)
        results = attempt_results(probe.get_clock().now().nanoseconds)
        for msg in results:
            probe.results.publish(msg)
        probe.wait_fact(lambda f: f.kind == "skill_success_rate" and TARGET in f.key
                        and f.n_observations == len(results), 60)
        wait_until(lambda: probe.grounding.query(SKILL, TARGET, ENVIRONMENT,
                                                 min_confidence=0.5).ok, 30, "an OK answer")
        assert started["bad"][1].wait_identity(60).state == IdentityStatus.MISMATCH
        yield started
    finally:
        for stack, probe in started.values():
            stack.stop()
            stack.log.close()
            ros_executor.remove_node(probe)
            probe.destroy_node()


def run_tools(namespace: str, calls, db_url: str = "", timeout_s: float = 15.0):
    """Start `robot-memory mcp` over stdio with the SDK's client, list the tools, make
    `calls` [(tool, arguments)] in one session; (tools, [(text, is_error)])."""
    async def session():
        server = StdioServerParameters(
            command=sys.executable,
            args=["-m", "robot_memory.cli", "mcp", "--namespace", namespace, "--timeout-s",
                  str(timeout_s)] + (["--db", db_url] if db_url else []),
            env=dict(os.environ))
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                tools = (await client.list_tools()).tools
                answers = []
                for name, arguments in calls:
                    result = await client.call_tool(name, arguments)
                    answers.append(("\n".join(c.text for c in result.content),
                                    result.is_error))
                return tools, answers
    return anyio.run(session)


def events_by_kind(db_url: str) -> dict[str, int]:
    store = MemoryStore(db_url)
    try:
        with store.read() as conn:
            rows = conn.exec_driver_sql("SELECT kind, count(*) FROM events GROUP BY kind")
            return dict(rows.fetchall())
    finally:
        store.close()


def test_an_mcp_client_calls_every_tool_on_a_verified_stack(stacks):
    stack, probe = stacks["ok"]
    before = events_by_kind(stack.db_url)
    skill_fact = probe.wait_fact(lambda f: f.kind == "skill_success_rate" and TARGET in f.key)
    ground = {"skill_id": SKILL, "target_class": TARGET, "environment": ENVIRONMENT,
              "min_confidence": 0.5, "intent_id": INTENT}
    first_event = 3
    calls = [("ground", ground),
             ("ground", {**ground, "target_class": UNKNOWN_TARGET}),
             ("ground", {**ground, "target_class": UNKNOWN_TARGET, "allow_analogies": True,
                         "target_properties": {"mass_kg": 0.21}}),
             ("explain_fact", {"kind": skill_fact.kind, "key": skill_fact.key}),
             ("explain_fact", {"fact_id": 10 ** 9}),
             ("facts", {}),
             ("facts", {"kind": "zone_risk"}),
             ("consolidate_preview", {}),
             ("replay_facts", {"until_event_id": first_event}),
             ("replay_facts", {}),
             ("ground", {"target_class": TARGET})]  # no skill_id: the schema refuses it
    tools, answers = run_tools(probe.namespace, calls, stack.db_url)

    assert sorted(t.name for t in tools) == sorted(TOOL_NAMES)
    for tool in tools:
        assert tool.description and tool.annotations.read_only_hint, tool.name
        assert not tool.annotations.destructive_hint, tool.name
        for name, field in tool.input_schema.get("properties", {}).items():
            assert field.get("description"), f"{tool.name}.{name} has no description"
    texts = [text for text, _ in answers]
    ok, abstain, analogy, explained, unknown, facts, zone, preview, replay, no_bound, \
        no_skill = texts

    # `ground`: the service's own answer, rendered; audited under the intent.
    service = probe.grounding.query(SKILL, TARGET, ENVIRONMENT, min_confidence=0.5)
    assert ok.startswith("OK: memory holds facts of THIS robot"), ok
    assert "recommended force_n=25" in ok
    expected = render_ground({"status": service.status,
                              "facts": [fact_dict(f) for f in service.facts]},
                             SKILL, TARGET, ENVIRONMENT)
    assert ok.splitlines()[:len(expected.splitlines())] == expected.splitlines()
    assert "(audited)" in ok.splitlines()[-1]
    assert abstain.startswith(f"ABSTAIN (no_fact): memory has no fact it will serve about "
                              f"{SKILL} on {UNKNOWN_TARGET}"), abstain
    assert analogy.startswith(("ANALOGY (no_fact): memory has NO fact of this robot",
                               "ABSTAIN (no_close_case)")), analogy
    if analogy.startswith("ANALOGY"):
        assert f"{TARGET} (OTHER target)" in analogy
    wait_until(lambda: events_by_kind(stack.db_url).get("fact_consultation", 0)
               >= before.get("fact_consultation", 0) + 3, 10, "the consultations' audit")

    assert explained.startswith("EXPLAIN: the provenance of this fact"), explained
    assert skill_fact.key in explained
    assert unknown.startswith("NOT FOUND: memory cannot explain this fact"), unknown
    # The ground call above was made for INTENT: once its consultation is written (the
    # audit writes off the request path), the lineage holds it.
    (lineage, _), = run_tools(probe.namespace, [("explain_action", {"intent_id": INTENT})],
                              stack.db_url)[1]
    assert lineage.startswith(f"EXPLAIN: the lineage of intent {INTENT}"), lineage
    assert "consultation" in lineage and SKILL in lineage, lineage

    assert facts.startswith("FACTS: ") and "facts of THIS robot" in facts, facts
    assert f"skill_success_rate [{skill_fact.key}] active" in facts
    zone_lines = zone.splitlines()[1:]
    assert zone_lines and all(line.startswith("- zone_risk [") for line in zone_lines), zone

    assert preview.startswith("PREVIEW (dry run, NOTHING APPLIED)"), preview

    # replay_facts: what `robot-memory replay` says for the same point of the log.
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["replay", "--db", stack.db_url, "--manifest", MANIFEST,
                         "--until-event", str(first_event)]) == 0
    snapshot = json.loads(out.getvalue())
    assert replay.startswith(f"REPLAY: the facts of THIS robot (identity "
                             f"{probe.identity[-1].computed_hash}) as they were after event "
                             f"{first_event}"), replay
    assert len(replay.splitlines()) == 1 + max(len(snapshot), 1)
    for entry in snapshot:
        assert f"- {entry['kind']} [{entry['key']}] {entry['status']}; " \
               f"confidence={entry['confidence']:.2f}; n={entry['n_observations']}" in replay
    assert no_bound.startswith("REFUSED: replay_facts: give exactly one"), no_bound
    assert answers[-1][1] and "skill_id" in no_skill  # a schema error, said as one

    # Read-only: nothing but the consultations' audit was written.
    after = events_by_kind(stack.db_url)
    assert {k: v for k, v in after.items() if k != "fact_consultation"} == \
        {k: v for k, v in before.items() if k != "fact_consultation"}


def test_every_tool_says_the_stack_is_down_and_reads_nothing(stacks, tmp_path):
    stack, _ = stacks["ok"]
    calls = [("ground", {"skill_id": SKILL, "target_class": TARGET}),
             ("explain_fact", {"fact_id": 1}), ("explain_action", {"intent_id": INTENT}),
             ("facts", {}), ("consolidate_preview", {}), ("replay_facts", {"until_event_id": 3})]
    # The verified stack's store is given: it must not be read around the absent stack.
    _, answers = run_tools(f"nobody_{os.getpid()}", calls, stack.db_url, timeout_s=1.0)
    for (name, _), (text, is_error) in zip(calls, answers):
        assert not is_error, (name, text)
        assert text.startswith(f"UNAVAILABLE: memory could not be asked ({name})"), text
        assert "is the stack running?" in text or "no answer" in text, text


def test_every_tool_refuses_on_an_unverified_identity(stacks):
    stack, probe = stacks["bad"]
    calls = [("ground", {"skill_id": SKILL, "target_class": TARGET}),
             ("explain_fact", {"fact_id": 1}), ("facts", {}), ("consolidate_preview", {}),
             ("replay_facts", {"until_event_id": 3})]
    _, answers = run_tools(probe.namespace, calls, stack.db_url)
    ground, explained, facts, preview, replay = [text for text, _ in answers]
    assert ground.startswith("REFUSED (identity_unverified): memory refused"), ground
    assert explained.startswith("REFUSED: explain_fact: inactive:"), explained
    assert facts.startswith("REFUSED: facts: identity MISMATCH"), facts
    assert preview.startswith("REFUSED: no preview: inactive:"), preview
    assert replay.startswith("REFUSED: replay_facts: identity MISMATCH"), replay


def free_port() -> int:
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        return probe_socket.getsockname()[1]


def test_the_http_transport_listens_on_loopback_only(stacks, tmp_path):
    _, probe = stacks["ok"]
    port = free_port()
    log = open(tmp_path / "mcp.log", "wb")
    server = subprocess.Popen([sys.executable, "-m", "robot_memory.cli", "mcp", "--transport",
                               "http", "--port", str(port), "--namespace", probe.namespace],
                              stdout=log, stderr=log)
    try:
        listening = wait_until(lambda: [c.laddr for c in psutil.Process(server.pid)
                                        .net_connections("tcp") if c.status == "LISTEN"],
                               30, "the server to listen")
        assert [(a.ip, a.port) for a in listening] == [("127.0.0.1", port)]

        async def ask():
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write):
                async with ClientSession(read, write) as client:
                    await client.initialize()
                    result = await client.call_tool("ground", {
                        "skill_id": SKILL, "target_class": TARGET, "environment": ENVIRONMENT,
                        "min_confidence": 0.5})
                    return result.content[0].text
        assert anyio.run(ask).startswith("OK: memory holds facts of THIS robot")
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def tick_until_done(tree, timeout_s: float = 15.0):
    """Tick every 20 ms until the root is no longer RUNNING: (status, RUNNING ticks)."""
    running = 0
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        tree.tick()
        if tree.root.status != py_trees.common.Status.RUNNING:
            return tree.root.status, running
        running += 1
        time.sleep(0.02)
    raise AssertionError(f"the tree was still RUNNING after {timeout_s} s")


def leaf_tree(leaf):
    """The leaf ahead of an action that runs only on its SUCCESS."""
    act = py_trees.behaviours.Success("act")
    return py_trees.trees.BehaviourTree(py_trees.composites.Sequence(
        "pick", memory=True, children=[leaf, act])), act


def board(prefix: str = "/robot_memory/ground") -> dict:
    storage = py_trees.blackboard.Blackboard.storage
    return {k.rsplit("/", 1)[-1]: v for k, v in storage.items() if k.startswith(prefix + "/")}


def test_the_leaf_grounds_a_tree_through_ok_abstain_and_a_stack_that_is_down(stacks):
    _, probe = stacks["ok"]
    py_trees.blackboard.Blackboard.clear()
    tree, act = leaf_tree(GroundBehaviour("ground cup", probe, SKILL, TARGET, ENVIRONMENT,
                                          min_confidence=0.5, intent_id="bt-intent-1"))
    status, running = tick_until_done(tree)
    assert status == py_trees.common.Status.SUCCESS and act.status == status
    assert running >= 1  # the first tick sent the request and did not wait for it
    answer = board()
    assert answer["status"] == "OK" and answer["reason_code"] == ""
    assert answer["recommended_parameters"] == {"force_n": 25.0}
    assert answer["consultation_id"]

    tree, act = leaf_tree(GroundBehaviour("ground jar", probe, SKILL, UNKNOWN_TARGET,
                                          ENVIRONMENT))
    status, _ = tick_until_done(tree)
    assert status == py_trees.common.Status.FAILURE
    assert act.status == py_trees.common.Status.INVALID  # never ran
    answer = board()
    assert (answer["status"], answer["reason_code"]) == ("ABSTAIN", "no_fact")
    assert answer["recommended_parameters"] == {} and answer["consultation_id"]

    started = time.monotonic()
    tree, _ = leaf_tree(GroundBehaviour("ground nowhere", probe, SKILL, TARGET,
                                        service_name=f"/nobody_{os.getpid()}/ground",
                                        service_timeout_s=1.0))
    status, running = tick_until_done(tree)
    assert status == py_trees.common.Status.FAILURE
    assert time.monotonic() - started >= 1.0 and running >= 10
    answer = board()
    assert (answer["status"], answer["reason_code"]) == ("UNAVAILABLE", "service_unavailable")
    assert "not available within 1 s" in answer["reason"] and answer["consultation_id"] == ""

"""Harness for tests that run the real nodes as processes and talk to them over DDS.

Each test gets its own namespace, a fresh SQLite file and a probe node in the test
process (spun by a background executor) that publishes, subscribes and calls services.
The stacks accept the operator key of the session (OPERATOR), which the probe signs the
mutating requests with (`call_signed`).
"""

from __future__ import annotations

import itertools
import threading
import time

import pytest
import rclpy
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node

from robot_memory.operation.bringup import Stack
from robot_memory.ros.client import GroundingClient
from robot_memory.manifest import load_manifest
from robot_memory.operation.operator_credentials import key_line
from robot_memory.msg import ExecutionResult, IdentityStatus, KeyValue, SemanticFactArray
from robot_memory.ros.credentials import sign_message
from robot_memory.ros.matching import wait_for_subscriber
from robot_memory.ros.qos import (DIAGNOSTICS_QOS, EXECUTION_RESULTS_QOS, FACTS_QOS,
                                  IDENTITY_STATUS_QOS)

_names = itertools.count()

# The operator the test stacks accept (start_stack's operator_keys), and the key the
# probe signs with: made once per session.
OPERATOR = "alice"
OPERATOR_KEY = Ed25519PrivateKey.generate()
OPERATOR_KEYS = [key_line(OPERATOR, OPERATOR_KEY.public_key())]

# Run a test against both process modes: `@BOTH_PROCESS_MODES` overrides the
# `one_process` fixture below (four processes unless a test asks).
BOTH_PROCESS_MODES = pytest.mark.parametrize("one_process", [False, True],
                                             ids=["four_processes", "one_process"])


def wait_until(predicate, timeout: float, what):
    """Poll until predicate() is truthy; `what` (text, or a callable for a message
    that reports the state at the time of failure) names it in the error."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for "
                                 f"{what() if callable(what) else what}")
        time.sleep(0.05)


class Probe(Node):
    """The test's own ROS node: the skill, the planner and the operator in one."""

    def __init__(self, namespace: str):
        super().__init__(f"probe_{next(_names)}", namespace=namespace)
        self.namespace = namespace
        self.identity: list[IdentityStatus] = []
        self.facts: list[SemanticFactArray] = []
        self.diagnostics: dict[str, dict[str, str]] = {}
        self.statuses: dict[str, tuple[int, str]] = {}  # node: (level, message)
        self.results = self.create_publisher(ExecutionResult, "execution_results",
                                             EXECUTION_RESULTS_QOS)
        self.create_subscription(IdentityStatus, "identity_status", self.identity.append,
                                 IDENTITY_STATUS_QOS)
        self.create_subscription(SemanticFactArray, "facts", self.facts.append, FACTS_QOS)
        self.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics,
                                 DIAGNOSTICS_QOS)
        self.grounding = GroundingClient(self, timeout_s=5.0)
        self._kept_clients = {}
        self.last_signed = None  # the request call_signed sent last, credential included

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.hardware_id.startswith(f"/{self.namespace}/"):
                node = status.hardware_id.rsplit("/", 1)[-1]
                self.diagnostics[node] = {kv.key: kv.value for kv in status.values}
                self.statuses[node] = (int.from_bytes(status.level, "little"), status.message)

    def call(self, srv_type, name: str, request, timeout: float = 30.0):
        """Call a service of the stack synchronously (the executor spins elsewhere).

        Clients are kept, and a new one waits a moment after wait_for_service: the server
        may not have matched it yet, and DDS then drops the request or the answer."""
        return self._call(self._client(srv_type, name, timeout), request, timeout)

    def call_signed(self, srv_type, name: str, request, timeout: float = 30.0,
                    key=OPERATOR_KEY):
        """call(), the request signed by the operator's `key` for this service."""
        client = self._client(srv_type, name, timeout)
        self.last_signed = sign_message(key, client.service_name, request)
        return self._call(client, self.last_signed, timeout)

    def _client(self, srv_type, name: str, timeout: float):
        client = self._kept_clients.get((srv_type, name))
        new = client is None
        if new:
            client = self._kept_clients[(srv_type, name)] = self.create_client(srv_type, name)
        assert client.wait_for_service(timeout_sec=timeout), f"service {name} not available"
        if new:  # discovery is not symmetric: let the server's side match this client too
            time.sleep(0.5)
        return client

    def _call(self, client, request, timeout: float):
        name = client.service_name
        future = client.call_async(request)
        wait_until(future.done, timeout, f"an answer from {name}")
        return future.result()

    def wait_identity(self, timeout: float = 30.0) -> IdentityStatus:
        return wait_until(lambda: self.identity and self.identity[-1], timeout, "identity_status")

    def wait_logger(self, timeout: float = 30.0) -> None:
        assert wait_for_subscriber(self.results, timeout), "episodic_logger did not subscribe"

    def wait_fact(self, predicate, timeout: float = 30.0):
        def found():
            for snapshot in reversed(self.facts):
                for fact in snapshot.facts:
                    if predicate(fact):
                        return fact
            return None
        return wait_until(found, timeout, "a matching fact on 'facts'")

    def publish_result(self, stamp_s: float = 0.0, publisher=None, **fields) -> ExecutionResult:
        msg = ExecutionResult(skill_id=fields.pop("skill_id", "manipulation.grasp"),
                              target_class=fields.pop("target_class", "glass_cup"),
                              environment=fields.pop("environment", "sim_relaxed"),
                              success=fields.pop("success", True))
        msg.parameters = [KeyValue(key=k, value=v)
                          for k, v in fields.pop("parameters", {"force_n": 25.0}).items()]
        for key, value in fields.items():
            setattr(msg, key, value)
        msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp_s), int((stamp_s % 1) * 1e9)
        (publisher or self.results).publish(msg)
        return msg


@pytest.fixture(scope="session")
def ros_executor():
    rclpy.init()
    executor = MultiThreadedExecutor(num_threads=4)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    yield executor
    executor.shutdown()
    rclpy.try_shutdown()


@pytest.fixture
def namespace(request):
    return f"t{next(_names)}_{request.node.name[:20].strip('_').replace('[', '_')}" \
        .replace("-", "_").replace("]", "")


@pytest.fixture
def probe(ros_executor, namespace):
    node = Probe(namespace)
    ros_executor.add_node(node)
    yield node
    ros_executor.remove_node(node)
    node.destroy_node()


@pytest.fixture
def certified_hash(manifest_file):
    return load_manifest(manifest_file).identity_hash()


@pytest.fixture
def one_process():
    return False


@pytest.fixture
def start_stack(tmp_path, namespace, manifest_file, certified_hash, db_url, one_process):
    """start_stack(**parameter_overrides) -> Stack; logs go to tmp_path/stack.log. The
    stack runs in one process when the test is parametrized with one_process=True;
    nodes=[...] starts just those node processes."""
    stacks = []

    def start(use_sim_time: bool = False, own_process_group: bool = False,
              nodes: list[str] | None = None, **overrides) -> Stack:
        settings = {"database_url": db_url, "manifest_path": str(manifest_file),
                    "certified_hash": certified_hash, "period_s": 0.5,
                    "diagnostics_period_s": 0.2, "operator_keys": OPERATOR_KEYS, **overrides}
        log = open(tmp_path / "stack.log", "ab")
        stack = Stack(settings, use_sim_time=use_sim_time, namespace=namespace,
                      one_process=one_process, own_process_group=own_process_group,
                      **({"nodes": list(nodes)} if nodes else {}))
        stack.log_path = tmp_path / "stack.log"
        stacks.append((stack.start(stdout=log, stderr=log), log))
        return stack

    yield start
    for stack, log in stacks:
        stack.stop()
        log.close()


def stack_log(stack: Stack) -> str:
    return stack.log_path.read_text(errors="replace")

"""The verifier's signed checkpoints: checked at boot, signed once verified, every
`checkpoint_period_s` and at shutdown, appended to the witness file and optionally
published latched. The policy (what a missing key or witness means) is the core's
`CheckpointWitness`; this only wires it to a node."""

from __future__ import annotations

from typing import Any

from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from sqlalchemy.exc import SQLAlchemyError
from std_msgs.msg import String

from robot_memory.ros.qos import CHECKPOINT_QOS
from robot_memory.store import MemoryStore
from robot_memory.evidence.witness import CheckpointWitness, SignedCheckpoint, WitnessError


class CheckpointSigner:
    def __init__(self, node: Node, params: dict[str, Any]):
        self._node = node
        self._url = params["database_url"]
        self._period_s = params["checkpoint_period_s"]
        self.witness = CheckpointWitness(params["checkpoint_key_file"], params["witness_file"],
                                         params["require_witness"])
        self._publisher = (node.create_publisher(String, params["checkpoint_topic"],
                                                 CHECKPOINT_QOS)
                           if params["checkpoint_topic"] else None)
        self._identity: str | None = None
        self._timer = None
        self.last: SignedCheckpoint | None = None
        self.failures = 0

    def boot_problem(self, identity_hash: str) -> str:
        """Empty when the store's chain extends the newest signed checkpoint (or signing
        is off by configuration), else the diagnosis."""
        if self.witness.problem or not self.witness.enabled:
            return self.witness.problem
        try:
            store = MemoryStore(self._url)
        except Exception as exc:  # any driver error means the check cannot pass
            return f"cannot open store {self._url} for the witness check: {exc}"
        try:
            return self.witness.boot_check(store.partition(identity_hash))
        finally:
            store.close()

    def start(self, identity_hash: str) -> None:
        """Sign now (boot, after verification), then every checkpoint_period_s."""
        if self.witness.warning:
            self._node.get_logger().warning(self.witness.warning)
        if self.witness.off:
            self._node.get_logger().info(self.witness.off)
        if not self.witness.enabled:
            return
        self._identity = identity_hash
        self.sign("boot")
        self._timer = self._node.create_timer(self._period_s, lambda: self.sign("period"),
                                              clock=Clock(clock_type=ClockType.STEADY_TIME))

    def stop(self) -> None:
        """No more signatures (the store is no longer trusted)."""
        if self._timer is not None:
            self._node.destroy_timer(self._timer)
            self._timer = None
        self._identity = None

    def sign(self, occasion: str) -> None:
        if self._identity is None:
            return
        try:
            store = MemoryStore(self._url)
            try:
                self.last = self.witness.sign(store.partition(self._identity),
                                              self._node.get_clock().now().nanoseconds)
            finally:
                store.close()
        except (WitnessError, SQLAlchemyError, OSError) as exc:
            self.failures += 1
            self._node.get_logger().error(f"signed checkpoint ({occasion}) failed: {exc}")
            return
        self._node.get_logger().info(
            f"signed checkpoint ({occasion}) seq {self.last.checkpoint.seq} hash "
            f"{self.last.checkpoint.event_hash[:12]} appended to {self.witness.path}")
        # At shutdown the context is gone: the witness file has it, the topic cannot.
        if self._publisher is not None and self._node.context.ok():
            self._publisher.publish(String(data=self.last.to_line()))

    def diagnostic_values(self) -> dict[str, Any]:
        if not self.witness.enabled:
            return {"witness": "off", **({"signed_checkpoints": self.witness.off}
                                         if self.witness.off else {})}
        return {"witness": str(self.witness.path),
                "last_checkpoint_seq": self.last.checkpoint.seq if self.last else "none",
                "checkpoint_failures": self.failures}

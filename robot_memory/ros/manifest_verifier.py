"""manifest_verifier: re-hash the identity manifest at boot and gate the memory nodes.

Publishes one latched IdentityStatus on `identity_status`: VERIFIED only when the
manifest is valid, its hash equals the certified hash and (optionally) the store's
hash chain for that identity is intact. Then, and only then, it configures and
activates the memory lifecycle nodes (`managed_nodes`), and respects a transition an
operator makes: `~/manage_nodes` (robot_memory/ManageNodes, after nav2's
ManageLifecycleNodes) pauses and resumes them. Never repairs anything: a human must act.
"""

from __future__ import annotations

import sys
import threading

from rclpy.clock import Clock, ClockType
from rclpy.node import Node

from robot_memory.event_kinds import IDENTITY_VERIFICATION
from robot_memory.manifest import ManifestError, load_manifest, read_certified_hash
from robot_memory.msg import IdentityStatus
from robot_memory.ros.checkpoint_signer import CheckpointSigner
from robot_memory.ros.credentials import CredentialCheck
from robot_memory.srv import ManageNodes
from robot_memory.ros.diagnostics import ERROR, OK, WARN, DiagnosticsPublisher
from robot_memory.ros.identity_gate import STATE_NAMES
from robot_memory.ros.lifecycle_manager import LifecycleManager
from robot_memory.ros.params import declare_parameters
from robot_memory.ros.spin import NodeSpec, run_node
from robot_memory.ros.qos import IDENTITY_STATUS_QOS
from robot_memory.ros.sim_clock import waiting_for_clock
from robot_memory.store import MemoryStore, check_store


class ManifestVerifier(Node):
    def __init__(self, **kwargs):
        super().__init__("manifest_verifier", **kwargs)
        self.params = declare_parameters(self, "manifest_verifier")
        self._publisher = self.create_publisher(IdentityStatus, "identity_status",
                                                IDENTITY_STATUS_QOS)
        self.checkpoints = CheckpointSigner(self, self.params)
        self.status = self.check()
        self._publisher.publish(self.status)
        level = self.get_logger().info if self.status.state == IdentityStatus.VERIFIED \
            else self.get_logger().error
        level(f"identity {STATE_NAMES[self.status.state]}: {self.status.reason}")
        # Only a verified identity and store bring the memory nodes up; otherwise they
        # stay unconfigured until a human acts (no automatic repair).
        self.lifecycle = None
        if self.status.state == IdentityStatus.VERIFIED:
            self.checkpoints.start(self.status.computed_hash)
        if self.status.state == IdentityStatus.VERIFIED and self.params["managed_nodes"]:
            self.lifecycle = LifecycleManager(self, list(self.params["managed_nodes"]),
                                              hold_all=lambda: waiting_for_clock(self))
        self.full_check_done = False
        if self.status.state == IdentityStatus.VERIFIED and self.params["full_check_after_boot"]:
            self._start_full_check()
        # Only an operator may pause, resume or start the memory nodes: every command
        # needs a signed credential.
        self.credentials = CredentialCheck(self, self.params)
        self._manage_service = self.create_service(ManageNodes, "~/manage_nodes",
                                                   self.on_manage_nodes_request)
        self.diagnostics = DiagnosticsPublisher(self)
        self.create_timer(self.params["diagnostics_period_s"], self._publish_diagnostics,
                          clock=Clock(clock_type=ClockType.STEADY_TIME))

    def _publish_diagnostics(self) -> None:
        state = STATE_NAMES[self.status.state]
        values = {"memory_integrity_status": state, "identity_hash": self.status.computed_hash,
                  "certified_hash": self.status.certified_hash,
                  "full_check": ("done" if self.full_check_done else "running")
                  if self.params["full_check_after_boot"] and state != "UNVERIFIED" else "off"}
        message = f"identity {state}: {self.status.reason}"
        holds = {}
        if self.lifecycle is not None:
            values.update({f"node.{name}": label for name, label in self.lifecycle.states.items()})
            holds = self.lifecycle.policy.holds
            values.update({f"held.{name}": holds.get(name, "no")
                           for name in self.lifecycle.node_names})
        values.update(self.checkpoints.diagnostic_values())
        values.update(self.credentials.diagnostic_values())
        level = OK if self.status.state == IdentityStatus.VERIFIED else ERROR
        if level == OK and self.checkpoints.witness.warning:
            level, message = WARN, f"{message}; {self.checkpoints.witness.warning}"
        if self.lifecycle is not None and self.lifecycle.held_all and level in (OK, WARN):
            level = WARN
            message += f"; memory nodes held: {self.lifecycle.held_all}"
        if holds and level in (OK, WARN):
            level = WARN
            message += "; held by an operator: " + ", ".join(
                f"{name} ({why})" for name, why in sorted(holds.items()))
        self.diagnostics.publish(level, message, values)

    def on_manage_nodes_request(self, request, response):
        managed = list(self.params["managed_nodes"])
        names = list(request.node_names) or managed
        unknown = sorted(set(names) - set(managed))
        operator, refused = self.credentials.operator_of(self._manage_service.service_name,
                                                         request)
        if operator is None:  # counted and logged (throttled) by the check
            response.success, response.message = False, refused
            return response
        if unknown:
            response.success = False
            response.message = f"node_names: {unknown} not managed; managed_nodes: {managed}"
        elif request.command == ManageNodes.Request.PAUSE:
            if self.lifecycle is not None:
                self.lifecycle.pause(names)
            response.success = True
            response.message = f"pausing {', '.join(names)}: held inactive until RESUME"
        elif request.command in (ManageNodes.Request.RESUME, ManageNodes.Request.STARTUP):
            names = managed if request.command == ManageNodes.Request.STARTUP else names
            if self.lifecycle is None or self.lifecycle.stopped:
                # Only the identity and the store override the operator, toward inactive.
                response.success = False
                response.message = (f"not resuming: identity {STATE_NAMES[self.status.state]}:"
                                    f" {self.status.reason}")
            else:
                self.lifecycle.resume(names)
                missing = self.lifecycle.unavailable(names)
                response.success = not missing
                response.message = f"resuming {', '.join(names)}: the verifier brings them up"
                if missing:  # released all the same: a respawned node is brought up
                    response.message += "; cannot now: " + "; ".join(
                        f"{name} {why}" for name, why in sorted(missing.items())) + \
                        " (a respawn of its process brings it back)"
        else:
            response.success = False
            response.message = (f"command: {request.command} is not STARTUP (0), PAUSE (1) "
                                "or RESUME (2)")
        self.get_logger().info(f"manage_nodes by {operator.name}: {response.message}")
        return response

    def check(self) -> IdentityStatus:
        status = IdentityStatus(manifest_path=self.params["manifest_path"])
        status.header.stamp = self.get_clock().now().to_msg()
        try:
            if not self.params["manifest_path"]:
                raise ManifestError("manifest_path parameter is empty")
            manifest = load_manifest(self.params["manifest_path"])
            status.computed_hash = manifest.identity_hash()
            status.certified_hash = read_certified_hash(self.params["certified_hash"],
                                                        self.params["certified_hash_file"])
        except ManifestError as exc:
            status.state, status.reason = IdentityStatus.INVALID_MANIFEST, str(exc)
            return status
        if status.computed_hash != status.certified_hash:
            status.state = IdentityStatus.MISMATCH
            status.reason = (f"manifest {self.params['manifest_path']} hashes to "
                             f"{status.computed_hash}, certified hash is {status.certified_hash}")
            return status
        problem = self._check_store(status.computed_hash, status)
        if problem:
            status.state, status.reason = IdentityStatus.STORE_CORRUPTED, problem
            return status
        status.state = IdentityStatus.VERIFIED
        status.reason = f"manifest hash matches the certified hash {status.certified_hash}"
        return status

    def _check_store(self, identity_hash: str, status: IdentityStatus) -> str:
        """Empty when the store opens and passes the boot check, else why not; the
        store's id goes into `status`."""
        if self.params["verify_store_on_boot"]:
            verdict = check_store(self.params["database_url"], identity_hash, record=True,
                                  sample=self.params["boot_sample_events"])
            if not verdict.ok:
                return "; ".join(verdict.lines)
        problem = self.checkpoints.boot_problem(identity_hash)
        if problem:
            return problem
        try:
            store = MemoryStore(self.params["database_url"])
        except Exception as exc:  # any driver error means we must not serve
            return f"cannot open store {self.params['database_url']}: {exc}"
        status.store_id = store.store_id
        try:
            store.partition(identity_hash).append(
                IDENTITY_VERIFICATION, {"state": "VERIFIED",
                                        "manifest_path": self.params["manifest_path"]},
                self.get_clock().now().nanoseconds)
            return ""
        finally:
            store.close()

    def _start_full_check(self) -> None:
        """Re-hash the whole store in the background; serving goes on meanwhile, and is
        withdrawn (STORE_CORRUPTED) if anything older than the checkpoint was altered."""
        self._full_verdict = None
        identity = self.status.computed_hash

        def run() -> None:
            self._full_verdict = check_store(self.params["database_url"], identity, full=True)

        threading.Thread(target=run, name="full_store_check", daemon=True).start()
        self._full_timer = self.create_timer(0.2, self._on_full_check_poll,
                                             clock=Clock(clock_type=ClockType.STEADY_TIME))

    def _on_full_check_poll(self) -> None:
        verdict = self._full_verdict
        if verdict is None:
            return
        self.destroy_timer(self._full_timer)
        self.full_check_done = True
        if verdict.ok:
            self.get_logger().info("full store check passed: " + "; ".join(verdict.lines))
            return
        if self.lifecycle is not None:
            self.lifecycle.stop()
        self.checkpoints.stop()
        self.status.state = IdentityStatus.STORE_CORRUPTED
        self.status.reason = "full store check failed: " + "; ".join(verdict.lines)
        self.status.header.stamp = self.get_clock().now().to_msg()
        self._publisher.publish(self.status)
        self.get_logger().error(f"identity STORE_CORRUPTED: {self.status.reason}; the memory "
                                "nodes are withdrawn until a human acts")


def node_spec() -> NodeSpec:
    # The last signed checkpoint covers everything written before the stop.
    return NodeSpec(ManifestVerifier,
                    before_destroy=lambda node: node.checkpoints.sign("shutdown"))


def main(args=None) -> None:
    run_node(node_spec(), args)


if __name__ == "__main__":
    main(sys.argv)

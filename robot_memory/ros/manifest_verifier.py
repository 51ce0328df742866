"""manifest_verifier: re-hash the identity manifest at boot and gate the memory nodes.

Publishes one latched IdentityStatus on `identity_status`: VERIFIED only when the
manifest is valid, its hash equals the certified hash and (optionally) the store's
hash chain for that identity is intact. Then, and only then, it configures and
activates the memory lifecycle nodes (`managed_nodes`). Never repairs anything: a human
must act.
"""

from __future__ import annotations

import sys

from rclpy.node import Node

from robot_memory.event_kinds import IDENTITY_VERIFICATION
from robot_memory.manifest import ManifestError, load_manifest, read_certified_hash
from robot_memory.msg import IdentityStatus
from robot_memory.ros.identity_gate import STATE_NAMES
from robot_memory.ros.lifecycle_manager import LifecycleManager
from robot_memory.ros.params import declare_parameters
from robot_memory.ros.spin import run_node
from robot_memory.ros.qos import IDENTITY_STATUS_QOS
from robot_memory.store import MemoryStore, StoreError, verify_chain



class ManifestVerifier(Node):
    def __init__(self, **kwargs):
        super().__init__("manifest_verifier", **kwargs)
        self.params = declare_parameters(self, "manifest_verifier")
        self._publisher = self.create_publisher(IdentityStatus, "identity_status",
                                                IDENTITY_STATUS_QOS)
        self.status = self.check()
        self._publisher.publish(self.status)
        level = self.get_logger().info if self.status.state == IdentityStatus.VERIFIED \
            else self.get_logger().error
        level(f"identity {STATE_NAMES[self.status.state]}: {self.status.reason}")
        # Only a verified identity and store bring the memory nodes up; otherwise they
        # stay unconfigured until a human acts (no automatic repair).
        self.lifecycle = None
        if self.status.state == IdentityStatus.VERIFIED and self.params["managed_nodes"]:
            self.lifecycle = LifecycleManager(self, list(self.params["managed_nodes"]))

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
        problem = self._check_store(status.computed_hash)
        if problem:
            status.state, status.reason = IdentityStatus.STORE_CORRUPTED, problem
            return status
        status.state = IdentityStatus.VERIFIED
        status.reason = f"manifest hash matches the certified hash {status.certified_hash}"
        return status

    def _check_store(self, identity_hash: str) -> str:
        """Empty when the store opens and this identity's chain is intact, else why not."""
        try:
            store = MemoryStore(self.params["database_url"])
        except (StoreError, Exception) as exc:  # any driver error means we must not serve
            return f"cannot open store {self.params['database_url']}: {exc}"
        try:
            partition = store.partition(identity_hash)
            if self.params["verify_store_on_boot"]:
                report = verify_chain(partition)
                if not report.ok:
                    return report.describe()
            partition.append(IDENTITY_VERIFICATION,
                             {"state": "VERIFIED", "manifest_path": self.params["manifest_path"]},
                             self.get_clock().now().nanoseconds)
            return ""
        finally:
            store.close()


def main(args=None) -> None:
    run_node(ManifestVerifier, args)


if __name__ == "__main__":
    main(sys.argv)

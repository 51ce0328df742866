"""Gate a memory node on the verifier's IdentityStatus.

A memory node writes and serves nothing until manifest_verifier has published
VERIFIED; the identity it then uses is the verified one, never a request field.
"""

from __future__ import annotations

from typing import Callable

from rclpy.node import Node

from robot_memory.msg import IdentityStatus
from robot_memory.ros.qos import IDENTITY_STATUS_QOS

STATE_NAMES = {IdentityStatus.UNVERIFIED: "UNVERIFIED", IdentityStatus.VERIFIED: "VERIFIED",
               IdentityStatus.MISMATCH: "MISMATCH",
               IdentityStatus.INVALID_MANIFEST: "INVALID_MANIFEST",
               IdentityStatus.STORE_CORRUPTED: "STORE_CORRUPTED"}


class IdentityGate:
    """Remembers the verified identity hash (None until VERIFIED arrives) and calls
    `on_verified(identity_hash)` once; `on_revoked()` if a later status withdraws it."""

    def __init__(self, node: Node, on_verified: Callable[[str], None],
                 on_revoked: Callable[[], None] | None = None, callback_group=None):
        self._node = node
        self._on_verified = on_verified
        self._on_revoked = on_revoked
        self.identity_hash: str | None = None
        self.manifest_path = ""  # the verified manifest's file, as the verifier read it
        self.store_id = ""  # the store the verifier checked ("" from an older verifier)
        self.state_name = "UNVERIFIED"  # the verifier's latest word (memory_integrity_status)
        self.reason = "waiting for manifest_verifier on identity_status"
        node.create_subscription(IdentityStatus, "identity_status", self._on_identity_status,
                                 IDENTITY_STATUS_QOS, callback_group=callback_group)
        node.get_logger().info(f"inactive: {self.reason}")

    def _on_identity_status(self, msg: IdentityStatus) -> None:
        log = self._node.get_logger()
        state = STATE_NAMES.get(msg.state, str(msg.state))
        self.state_name = state
        if msg.state == IdentityStatus.VERIFIED:
            if self.identity_hash == msg.computed_hash:
                return
            if self.identity_hash is not None:
                log.error(f"identity changed from {self.identity_hash} to {msg.computed_hash}; "
                          "refusing both until restart")
                self._revoke(f"identity changed while running ({state})")
                return
            self.identity_hash = msg.computed_hash
            self.manifest_path = msg.manifest_path
            self.store_id = msg.store_id
            self.reason = (f"identity {msg.computed_hash} verified; waiting for "
                           "manifest_verifier to activate this node")
            self._on_verified(msg.computed_hash)
            log.info(f"identity VERIFIED {msg.computed_hash}")
            return
        self.reason = f"identity {state}: {msg.reason}"
        log.error(f"refusing to write or serve: {self.reason}")
        if self.identity_hash is not None:
            self._revoke(self.reason)

    def _revoke(self, reason: str) -> None:
        self.reason = reason
        self.identity_hash = None
        if self._on_revoked is not None:
            self._on_revoked()

"""Operator credentials at the ROS boundary: a request message's fields as the core
(robot_memory.operation.operator_credentials) signs and checks them, and the check a node runs on
each mutating request: counted by reason for /diagnostics, logged with a stable line (the
first of each service and reason at once, then at most one a second)."""

from __future__ import annotations

from typing import Any

from rclpy.node import Node

from robot_memory.operation.log_throttle import LogThrottle, held_back
from robot_memory.operation.operator_credentials import (CredentialRefused, CredentialVerifier,
                                                         OperatorKey, sign_request)


def srv_type_of(request: Any) -> str:
    """`Override` for an Override.Request (the key of REQUEST_FIELDS)."""
    return type(request).__name__.removesuffix("_Request")


def request_fields(request: Any) -> dict[str, Any]:
    """Every field of a request message but its credential, as plain values."""
    fields = {}
    for name in request.get_fields_and_field_types():
        if name != "credential":
            value = getattr(request, name)
            fields[name] = list(value) if isinstance(value, (list, tuple)) else value
    return fields


def sign_message(private_key, service_name: str, request: Any) -> Any:
    """Fill `request.credential` for a call to `service_name` (the full name, as
    `client.service_name` gives it); returns the request."""
    request.credential = sign_request(private_key, service_name, srv_type_of(request),
                                      request_fields(request))
    return request


class CredentialCheck:
    """A node's check of operator credentials, from its parameters."""

    def __init__(self, node: Node, params: dict[str, Any]):
        self._node = node
        self.verifier = CredentialVerifier(params["operator_keys"],
                                           params["operator_keys_file"],
                                           params["operator_credential_window_s"])
        self._throttle = LogThrottle(1.0)
        logger = node.get_logger()
        if self.verifier.problem:
            logger.error(f"operator keys: {self.verifier.problem}; every mutating request "
                         "is refused")
        elif not self.verifier.keys:
            logger.info("no operator keys configured: override, consolidate (apply) and "
                        "manage_nodes requests are refused (docs/security.md)")

    def operator_of(self, service_name: str, request: Any) -> tuple[OperatorKey | None, str]:
        """(the operator who signed the request, "") or (None, why it is refused)."""
        try:
            operator = self.verifier.verify(service_name, srv_type_of(request),
                                            request_fields(request), request.credential)
        except CredentialRefused as exc:
            reason = f"refused: credential {exc.reason}: {exc.detail}"
            held = self._throttle.admit((service_name, exc.reason))
            if held is not None:
                self._node.get_logger().warning(
                    f"refused {service_name} request: credential {exc.reason}: {exc.detail}"
                    f"{held_back(held)}")
            return None, reason
        self._node.get_logger().info(f"accepted {service_name} request signed by "
                                     f"{operator.name} (key {operator.key_id})")
        return operator, ""

    def diagnostic_values(self) -> dict[str, Any]:
        verifier = self.verifier
        values: dict[str, Any] = {"operator_keys": verifier.describe_keys(),
                                  "accepted_credentials": verifier.accepted,
                                  "refused_credentials": sum(verifier.refused.values())}
        values.update({f"refused_credentials.{code}": n
                       for code, n in sorted(verifier.refused.items())})
        return values

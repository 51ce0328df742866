"""`sign`: an operator's credential for a request to the running stack's `override`,
`consolidate` or `manifest_verifier/manage_nodes` service (docs/security.md#operator-
credentials). It prints the whole request, credential included, for `ros2 service call`.

The command line's other verbs that change the store (`override`, `consolidate
--apply`, ...) open the database themselves: what guards them is the file access of
the user who runs them, not a credential."""

from __future__ import annotations

import json

from robot_memory.cli.common import CommandError

# The service each request type goes to, without a namespace.
SERVICES = {"override": ("Override", "override"),
            "consolidate": ("Consolidate", "consolidate"),
            "manage-nodes": ("ManageNodes", "manifest_verifier/manage_nodes")}
COMMANDS = {"STARTUP": 0, "PAUSE": 1, "RESUME": 2}


def service_name(namespace: str, relative: str, explicit: str = "") -> str:
    """The full name the node's service has: `/NAMESPACE/RELATIVE`, or `explicit`."""
    if explicit:
        return explicit if explicit.startswith("/") else f"/{explicit}"
    namespace = namespace.strip("/")
    return f"/{namespace}/{relative}" if namespace else f"/{relative}"


def request_of(args) -> dict:
    """The request's fields, from the verb's options."""
    if args.request == "override":
        if args.value is not None:
            try:
                json.loads(args.value)
            except json.JSONDecodeError as exc:
                raise CommandError(f"--value: not JSON: {exc}") from exc
        return {"action": args.action, "operator_name": args.operator_name,
                "reason": args.reason, "fact_id": args.fact_id, "kind": args.kind,
                "key": args.fact_key, "value_json": args.value or "",
                "confidence": args.confidence, "archive_path": args.archive}
    if args.request == "consolidate":
        return {"dry_run": False}
    command = args.command.upper()
    if command not in COMMANDS and command not in {"0", "1", "2"}:
        raise CommandError(f"--command: {args.command!r} is not STARTUP, PAUSE or RESUME "
                           "(or 0, 1, 2)")
    return {"command": COMMANDS.get(command, int(command) if command.isdigit() else 0),
            "node_names": list(args.node)}


def cmd_sign(args) -> int:
    from robot_memory.evidence.witness import load_private_key
    from robot_memory.operation.operator_credentials import request_document, sign_request
    srv_type, relative = SERVICES[args.request]
    fields = request_of(args)
    key = load_private_key(args.key)
    service = service_name(args.namespace, relative, args.service)
    credential = sign_request(key, service, srv_type, fields)
    if args.credential_only:
        print(credential)
    else:  # JSON is YAML's flow style: `ros2 service call` reads it as it is
        print(json.dumps({**request_document(srv_type, fields), "credential": credential},
                         ensure_ascii=False))
    return 0

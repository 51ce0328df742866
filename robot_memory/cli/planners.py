"""Verbs for planners: `mcp`, the robot's memory as read-only tools for an MCP host."""

from __future__ import annotations

from robot_memory.cli.common import CommandError, check_url

TRANSPORTS = ("stdio", "http")


def cmd_mcp(args) -> int:
    """Serve the tools until the host closes stdin (stdio) or the process is stopped
    (http). On stdio, stdout is the protocol's: everything else goes to stderr."""
    from robot_memory.planners.mcp_server import MISSING_SDK
    if MISSING_SDK:
        raise CommandError(f"the MCP SDK is not installed ({MISSING_SDK}); install the mcp "
                           "line of requirements/python.txt (docs/planners.md)")
    if args.timeout_s <= 0:
        raise CommandError(f"--timeout-s {args.timeout_s}: must be > 0")
    if not 0 < args.port < 65536:
        raise CommandError(f"--port {args.port}: must be in 1..65535")
    check_url(args.db)  # read by replay_facts only, but refused now rather than then
    from robot_memory.ros.mcp_tools import run_server
    run_server(args.namespace, args.timeout_s, args.db, args.transport, args.host, args.port)
    return 0

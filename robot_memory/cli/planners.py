"""Verbs for planners: `mcp`, the robot's memory as read-only tools for an MCP host."""

from __future__ import annotations

import threading

from robot_memory.cli.common import CommandError, check_url

TRANSPORTS = ("stdio", "http")


def cmd_mcp(args) -> int:
    """Serve the tools until the host closes stdin (stdio) or the process is stopped
    (http). On stdio, stdout is the protocol's: everything else goes to stderr."""
    from robot_memory.planners.mcp_server import MISSING_SDK, serve
    if MISSING_SDK:
        raise CommandError(f"the MCP SDK is not installed ({MISSING_SDK}); install the mcp "
                           "line of requirements/python.txt (docs/planners.md)")
    if args.timeout_s <= 0:
        raise CommandError(f"--timeout-s {args.timeout_s}: must be > 0")
    if not 0 < args.port < 65536:
        raise CommandError(f"--port {args.port}: must be in 1..65535")
    check_url(args.db)  # read by replay_facts only, but refused now rather than then
    import rclpy
    from rclpy.executors import MultiThreadedExecutor

    from robot_memory.ros.mcp_tools import StackTools
    rclpy.init(args=[])
    executor = MultiThreadedExecutor(num_threads=2)
    node = rclpy.create_node("robot_memory_mcp", namespace=args.namespace or "/")
    spinning = threading.Thread(target=executor.spin, name="mcp_ros", daemon=True)
    try:
        tools = StackTools(node, timeout_s=args.timeout_s, db_url=args.db)
        executor.add_node(node)
        spinning.start()
        serve(tools, "stdio" if args.transport == "stdio" else "http", args.host, args.port)
    finally:
        # In this order, so that no rclpy object outlives the context it was made in.
        executor.shutdown()
        if spinning.is_alive():
            spinning.join()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0

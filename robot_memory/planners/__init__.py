"""Planners: memory as tools for LLM planners and as a behaviour-tree leaf, ROS-free.

What a model or a tree is told, and how: the tools' names, descriptions and field
descriptions (tools.py), the text of every answer with its first line saying what it is
(answers.py), the MCP server over a backend of the running stack (mcp_server.py), the
point-of-log replay of the verified identity's facts (replay.py) and the leaf's outcome
and blackboard keys (leaf.py). The rclpy side is in robot_memory/ros/ (mcp_tools.py,
bt_ground.py); docs/planners.md says how to use them.
"""

"""robot_memory_all: the four nodes in one process (`robot-memory bringup --one-process`,
`ros2 run robot_memory robot_memory_all`, or the launch argument `one_process:=true`).

Same node names, parameters, topics, services and lifecycle behaviour as four processes:
each node is built as its own module builds it and spun by the executor that module
chooses, each executor in a thread of its own, so `ground` never waits behind intake or
a pass in another node's queue. One `--params-file` with a `/**/<node>` section per node
configures all four. A node whose callback raises ends the whole process (after the
others flush); a respawn then restarts all four, and the verifier activates them again.
"""

from __future__ import annotations

import sys

from robot_memory.ros import consolidator, episodic_logger, grounding_server, manifest_verifier
from robot_memory.ros.spin import NodeSpec, run_nodes


def node_specs() -> list[NodeSpec]:
    # Flushed on shutdown in this order: the consultation audit, then pending results.
    return [grounding_server.node_spec(), episodic_logger.node_spec(),
            consolidator.node_spec(), manifest_verifier.node_spec()]


def main(args=None) -> None:
    run_nodes(node_specs(), args)


if __name__ == "__main__":
    main(sys.argv)

"""Publishers on a result topic that the logger cannot hear, found in the ROS graph.

A publisher of another message type on `execution_results`, or one whose QoS does not
match the logger's reader (a best-effort publisher against the reliable reader, say),
never gets a result to the logger. DDS counts nothing as lost for it: rmw_fastrtps
raises no incompatible-type event at all, and the incompatible-QoS event names neither
the publisher nor its node. The graph names both, as `ros2 topic info -v` does.
"""

from __future__ import annotations

import time

from rclpy.qos import DurabilityPolicy, QoSCompatibility, QoSProfile, qos_check_compatible

RESULT_TYPE = "robot_memory/msg/ExecutionResult"
# What the graph gives for a writer whose node it does not know (yet, or ever: a DDS
# writer outside ROS).
UNKNOWN_NODE = "_NODE_NAME_UNKNOWN_"
# Seconds an unnamed writer waits for its node's name before it is reported without one:
# the graph often learns of a writer a moment before it learns the writer's node, and
# later still on a loaded machine.
NAME_GRACE_S = 5.0


# A volatile publisher against the durable reader (durable_results): two ways to hear it.
VOLATILE_HINT = (" (publish with robot_memory.ros.qos.EXECUTION_RESULTS_QOS, or set the "
                 "logger's durable_results to false)")


def _volatile_against_durable(offered: QoSProfile, requested: QoSProfile) -> bool:
    return (offered.durability == DurabilityPolicy.VOLATILE
            and requested.durability == DurabilityPolicy.TRANSIENT_LOCAL)


def unheard_on(node, topic: str, reader_qos: QoSProfile) -> list[tuple[bytes, str, str]]:
    """(endpoint gid, publisher node or "", why) for each publisher on `topic` that cannot
    reach a reader with `reader_qos`."""
    found = []
    for info in node.get_publishers_info_by_topic(topic):
        if info.topic_type != RESULT_TYPE:
            why = f"publishes {info.topic_type}, not {RESULT_TYPE}"
        else:
            compatibility, reason = qos_check_compatible(info.qos_profile, reader_qos)
            if compatibility != QoSCompatibility.ERROR:
                continue
            reasons = "; ".join(part.strip() for part in reason.split(";") if part.strip())
            why = f"QoS incompatible with the logger's reader: {reasons}"
            if _volatile_against_durable(info.qos_profile, reader_qos):
                why += VOLATILE_HINT
        name = "" if info.node_name == UNKNOWN_NODE else \
            f"{info.node_namespace.rstrip('/')}/{info.node_name}"
        found.append((bytes(info.endpoint_gid), name, why))
    return found


class UnheardPublishers:
    """What the graph shows now ({"<node> on <topic>": why}), and which of it is new since
    the last look: each one is logged once, when it appears, not every period."""

    def __init__(self):
        self.now: dict[str, str] = {}
        self._unnamed_since: dict[bytes, float] = {}

    def look(self, node, topics: list[str], reader_qos: QoSProfile,
             now: float | None = None) -> dict[str, str]:
        """Look again (at monotonic time `now`); returns the publishers that were not
        unheard at the last look."""
        now = time.monotonic() if now is None else now
        found: dict[str, str] = {}
        unnamed_since = {}
        for topic in topics:
            for gid, name, why in unheard_on(node, topic, reader_qos):
                if not name:
                    unnamed_since[gid] = since = self._unnamed_since.get(gid, now)
                    if now - since < NAME_GRACE_S:
                        continue
                    name = f"a DDS writer of no known node (gid {gid[:8].hex()})"
                found[f"{name} on {topic}"] = why
        self._unnamed_since = unnamed_since
        new = {where: why for where, why in found.items() if self.now.get(where) != why}
        self.now = found
        return new

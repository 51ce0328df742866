"""The shipped SROS2 policy grants each node exactly what it uses: the running nodes'
publishers, subscriptions, services and clients, as the ROS graph lists them (as
`ros2 node info` does), equal the policy's grants under the stack's namespace. A topic
or service added to a node and not to the policy, or a grant it no longer needs, fails
here."""

from sros2_policy import enclaves, grants

from rosgraph_msgs.msg import Clock

from robot_memory.operation.parameters import node_names
from ros.conftest import wait_until
from ros.test_governance import wait_active
from ros.test_sim_time import ClockAt

KINDS = {"publish": "get_publisher_names_and_types_by_node",
         "subscribe": "get_subscriber_names_and_types_by_node",
         "reply": "get_service_names_and_types_by_node",
         "request": "get_client_names_and_types_by_node"}


def graph_of(probe, node: str) -> set[tuple[str, str, str]]:
    namespace = f"/{probe.namespace}"
    return {(node, kind, name) for kind, method in KINDS.items()
            for name, _types in getattr(probe, method)(node, namespace)}


def test_each_node_is_granted_exactly_what_it_uses(probe, start_stack):
    start_stack(use_sim_time=True)  # /clock is read then: the policy allows it
    probe.wait_identity()
    ticking = ClockAt(probe.create_publisher(Clock, "/clock", 10), 100.0)  # sim time runs
    try:
        for node in ("episodic_logger", "consolidator", "grounding_server"):
            wait_active(probe, node)
    finally:
        ticking.stop()
    policy = enclaves()
    for node in node_names():
        (profile,) = policy[f"/robot_memory/{node}"]
        granted = grants(profile, namespace=f"/{probe.namespace}")
        # The graph fills in as discovery goes on: wait until it holds every grant.
        used = wait_until(lambda n=node: (g := graph_of(probe, n)) >= granted and g, 30,
                          lambda n=node: f"{n}: granted and unused: "
                                         f"{sorted(granted - graph_of(probe, n))}")
        assert used == granted, f"{node}: used and not granted: {sorted(used - granted)}"

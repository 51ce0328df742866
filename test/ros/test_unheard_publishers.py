"""A writer the graph knows before its node (or whose node it never learns: a DDS writer
outside ROS) is reported by name once the name arrives, and without one after a grace.
The graph here is a list of rclpy's own endpoint records: a writer outside ROS cannot be
made with the ROS 2 wheels alone. The live case is in test_logger_inputs."""

from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.topic_endpoint_info import TopicEndpointInfo

from robot_memory.ros.qos import EXECUTION_RESULTS_QOS, execution_results_reader_qos
from robot_memory.ros.unheard_publishers import (NAME_GRACE_S, RESULT_TYPE, UNKNOWN_NODE,
                                                 VOLATILE_HINT, UnheardPublishers)

READER_QOS = execution_results_reader_qos(1000, True)  # the logger's: durable
BEST_EFFORT = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)


class Graph:
    """What `Node.get_publishers_info_by_topic` answers, set by the test."""

    def __init__(self):
        self.publishers: list[TopicEndpointInfo] = []

    def get_publishers_info_by_topic(self, topic):
        return list(self.publishers)


def writer(gid: int, node: str = UNKNOWN_NODE, namespace: str = "/",
           topic_type: str = RESULT_TYPE, qos: QoSProfile = BEST_EFFORT) -> TopicEndpointInfo:
    return TopicEndpointInfo(node_name=node, node_namespace=namespace, topic_type=topic_type,
                             endpoint_gid=[gid] * 16, qos_profile=qos)


def test_a_writer_is_named_once_its_node_is_known_and_logged_once():
    graph, unheard = Graph(), UnheardPublishers()
    graph.publishers = [writer(1)]
    assert unheard.look(graph, ["execution_results"], READER_QOS, now=0.0) == {}  # name coming
    graph.publishers = [writer(1, "skill", "/arm")]
    new = unheard.look(graph, ["execution_results"], READER_QOS, now=0.2)
    assert list(new) == ["/arm/skill on execution_results"]
    assert new["/arm/skill on execution_results"] == (  # rclpy's words, with "; " between
        "QoS incompatible with the logger's reader: "
        "ERROR: Best effort publisher and reliable subscription; "
        "ERROR: Volatile publisher and transient local subscription" + VOLATILE_HINT)
    assert unheard.look(graph, ["execution_results"], READER_QOS) == {}  # not new again
    assert list(unheard.now) == ["/arm/skill on execution_results"]
    graph.publishers = []
    assert unheard.look(graph, ["execution_results"], READER_QOS) == {}
    assert unheard.now == {}


def test_a_writer_of_no_known_node_is_reported_after_the_grace():
    graph, unheard = Graph(), UnheardPublishers()
    graph.publishers = [writer(7, topic_type="std_msgs/msg/String")]
    for now in (0.0, 1.0, NAME_GRACE_S - 0.1):
        assert unheard.look(graph, ["execution_results"], READER_QOS, now=now) == {}
    new = unheard.look(graph, ["execution_results"], READER_QOS, now=NAME_GRACE_S)
    assert new == {"a DDS writer of no known node (gid 0707070707070707) on execution_results":
                   f"publishes std_msgs/msg/String, not {RESULT_TYPE}"}


def test_a_matching_publisher_is_not_reported():
    graph, unheard = Graph(), UnheardPublishers()
    graph.publishers = [writer(2, "skill", qos=EXECUTION_RESULTS_QOS)]
    for now in (0.0, NAME_GRACE_S, 2 * NAME_GRACE_S):
        assert unheard.look(graph, ["execution_results"], READER_QOS, now=now) == {}
    assert unheard.now == {}


def test_a_volatile_publisher_is_told_how_to_be_heard_and_a_volatile_reader_hears_it():
    graph = Graph()
    graph.publishers = [writer(3, "old_skill", qos=QoSProfile(depth=1000))]  # reliable
    assert UnheardPublishers().look(graph, ["execution_results"], READER_QOS, now=0.0) == {
        "/old_skill on execution_results": "QoS incompatible with the logger's reader: "
        "ERROR: Volatile publisher and transient local subscription" + VOLATILE_HINT}
    volatile_reader = execution_results_reader_qos(1000, True, durable=False)
    assert UnheardPublishers().look(graph, ["execution_results"], volatile_reader,
                                    now=0.0) == {}

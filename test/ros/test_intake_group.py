"""The logger's result readers: the executor runs neither them nor their message-lost
events (the intake thread takes the results and polls the events)."""

from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.node import Node

from robot_memory.msg import ExecutionResult
from robot_memory.ros.logger_intake import TakenByIntake, _taken_by_intake_only
from robot_memory.ros.qos import EXECUTION_RESULTS_QOS, execution_results_reader_qos
from robot_memory.ros.rclpy_internals import taking

from ros.conftest import wait_until


def test_the_executor_leaves_the_readers_and_their_events_to_the_intake(
        ros_executor, namespace):
    node = Node("intake_group", namespace=namespace)
    group = TakenByIntake()
    lost = []
    reader = node.create_subscription(
        ExecutionResult, "results", _taken_by_intake_only,
        execution_results_reader_qos(1000, True), callback_group=group, raw=True,
        event_callbacks=SubscriptionEventCallbacks(message_lost=lost.append,
                                                   use_default_callbacks=False))
    [message_lost] = reader.event_handlers
    assert not group.can_execute(reader) and not group.beginning_execution(reader)
    assert not group.can_execute(message_lost) and not group.beginning_execution(message_lost)
    writer = node.create_publisher(ExecutionResult, "results", EXECUTION_RESULTS_QOS)
    ros_executor.add_node(node)
    try:
        writer.publish(ExecutionResult(skill_id="manipulation.grasp"))
        taken = []

        def take() -> bool:  # as the intake thread does; the executor never took it
            with taking(reader) as take_one:
                got = take_one()
            if got is not None:
                taken.append(got)
            return bool(taken)
        wait_until(take, 10, "the result, left for the intake to take")
        data, info = taken[0]
        assert isinstance(data, bytes) and info["publication_sequence_number"] == 1
        assert lost == []  # nothing was lost, and no event was run for the result
    finally:
        ros_executor.remove_node(node)
        node.destroy_node()

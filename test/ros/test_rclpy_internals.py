"""The private rclpy attributes robot_memory/ros/rclpy_internals.py relies on are there, on
whichever distribution runs this: a changed rclpy fails here, not in the field."""

import rclpy
from rclpy.event_handler import SubscriptionEventCallbacks

from robot_memory.msg import ExecutionResult
from robot_memory.ros.qos import execution_results_reader_qos
from robot_memory.ros.rclpy_internals import READY_FLAG, poll_event


def test_a_message_lost_handler_can_be_polled(ros_executor):
    node = rclpy.create_node("rclpy_internals_probe")
    try:
        subscription = node.create_subscription(
            ExecutionResult, "rclpy_internals_results", lambda _: None,
            execution_results_reader_qos(10, True),
            event_callbacks=SubscriptionEventCallbacks(message_lost=lambda _: None,
                                                       use_default_callbacks=False))
        handlers = subscription.event_handlers
        assert handlers and all(hasattr(h, READY_FLAG) for h in handlers)
        assert [poll_event(h) for h in handlers] == [None] * len(handlers)  # nothing lost
    finally:
        node.destroy_node()


def test_an_empty_string_array_is_declared_with_its_value(ros_executor):
    from rcl_interfaces.msg import ParameterDescriptor, ParameterType

    from robot_memory.ros.rclpy_internals import declare_string_array
    node = rclpy.create_node("rclpy_internals_params")
    try:
        descriptor = ParameterDescriptor(type=ParameterType.PARAMETER_STRING_ARRAY,
                                         read_only=True)
        assert declare_string_array(node, "topics", [], descriptor) == []
        value = node.get_parameter("topics").get_parameter_value()
        assert (value.type, list(value.string_array_value)) == (
            ParameterType.PARAMETER_STRING_ARRAY, [])
    finally:
        node.destroy_node()


def test_a_lifecycle_nodes_state_machine_is_there_to_destroy(ros_executor):
    from rclpy.lifecycle import LifecycleNode

    from robot_memory.ros.rclpy_internals import STATE_MACHINE, destroy_lifecycle_node
    node = LifecycleNode("rclpy_internals_lifecycle")
    assert hasattr(getattr(node, STATE_MACHINE), "destroy_when_not_in_use")
    destroy_lifecycle_node(node)

"""The private rclpy attributes robot_memory/ros/rclpy_internals.py relies on are there, on
whichever distribution runs this (.ci/run: Kilted and Jazzy): a changed rclpy fails here,
not in the field. One test per entry of PRIVATE_NAMES."""

import pytest
import rclpy
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.executors import MultiThreadedExecutor

from robot_memory.msg import ExecutionResult
from robot_memory.ros import rclpy_internals
from robot_memory.ros.qos import EXECUTION_RESULTS_QOS, execution_results_reader_qos
from robot_memory.ros.rclpy_internals import PRIVATE_NAMES, READY_FLAG, poll_event, taking

from ros.conftest import wait_until


def test_each_private_name_is_used_by_a_function_here_and_tested_below():
    tested = {"poll_event": test_a_message_lost_handler_can_be_polled,
              "declare_string_array": test_an_empty_string_array_is_declared_with_its_value,
              "destroy_lifecycle_node": test_a_lifecycle_nodes_state_machine_is_there_to_destroy,
              "taking": test_a_raw_subscription_is_taken_from_outside_the_executor}
    assert sorted(entry.used_by for entry in PRIVATE_NAMES) == sorted(tested)
    for entry in PRIVATE_NAMES:
        assert "Why private" in getattr(rclpy_internals, entry.used_by).__doc__, entry


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


def test_a_raw_subscription_is_taken_from_outside_the_executor(ros_executor, namespace):
    node = rclpy.create_node("rclpy_internals_take", namespace=namespace)
    try:
        reader = node.create_subscription(ExecutionResult, "results", lambda _: None,
                                          execution_results_reader_qos(10, True), raw=True)
        writer = node.create_publisher(ExecutionResult, "results", EXECUTION_RESULTS_QOS)
        with taking(reader) as take:
            assert take() is None  # nothing has arrived
        writer.publish(ExecutionResult(skill_id="manipulation.grasp"))
        taken = []

        def take_one() -> bool:
            with taking(reader) as take:
                got = take()
            if got is not None:
                taken.append(got)
            return bool(taken)
        wait_until(take_one, 10, "the published result")
        data, info = taken[0]
        assert isinstance(data, bytes) and info["publication_sequence_number"] == 1
    finally:
        node.destroy_node()


def test_a_taker_without_take_message_fails_loudly():
    class Handle:
        def __enter__(self):
            return self

        def __exit__(self, *_exc):
            return False

    class Subscription:
        handle, msg_type, raw = Handle(), ExecutionResult, True

    with pytest.raises(AttributeError, match="rclpy_internals.py needs updating"):
        with taking(Subscription()):
            pass


def test_a_node_process_refuses_an_executor_with_a_pool(ros_executor):
    from robot_memory.ros.spin import _Spinner, _StopRequest
    node = rclpy.create_node("rclpy_internals_pool")
    executor = MultiThreadedExecutor(num_threads=2)
    try:
        with pytest.raises(TypeError, match="SingleThreadedExecutor"):
            _Spinner(node, executor, _StopRequest())
    finally:
        executor.shutdown()
        node.destroy_node()

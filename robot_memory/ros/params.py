"""Declare a node's parameters from the shared table, with descriptions and ranges."""

from __future__ import annotations

from typing import Any

from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                ParameterType)
from rclpy.node import Node

from robot_memory.operation.parameters import node_parameters, resolve_database_url
from robot_memory.ros.rclpy_internals import declare_string_array

_ROS_TYPES = {"string": ParameterType.PARAMETER_STRING, "bool": ParameterType.PARAMETER_BOOL,
              "int": ParameterType.PARAMETER_INTEGER,
              "double": ParameterType.PARAMETER_DOUBLE,
              "string_array": ParameterType.PARAMETER_STRING_ARRAY}


def declare_parameters(node: Node, table_name: str) -> dict[str, Any]:
    """Declare every parameter of `table_name` on `node`; return their values, checked
    against the table's types and ranges (ValueError naming the parameter otherwise)."""
    values = {}
    for name, spec in node_parameters(table_name).items():
        descriptor = ParameterDescriptor(name=name, type=_ROS_TYPES[spec.type],
                                         description=spec.description,
                                         read_only=spec.read_only)
        if spec.type == "double" and spec.min is not None:
            descriptor.floating_point_range = [FloatingPointRange(
                from_value=float(spec.min), to_value=float(spec.max), step=0.0)]
        if spec.type == "int" and spec.min is not None:
            descriptor.integer_range = [IntegerRange(from_value=int(spec.min),
                                                     to_value=int(spec.max), step=1)]
        if spec.type == "string_array":
            # Typed explicitly (an empty list has no type of its own in rclpy), and given
            # its default as a value, so `ros2 param get/dump` show it.
            value = declare_string_array(node, name, list(spec.default), descriptor)
        elif name == "database_url":  # the default lives under $ROS_HOME
            value = resolve_database_url(node.declare_parameter(
                name, resolve_database_url(spec.default), descriptor).value)
        else:
            value = node.declare_parameter(name, spec.default, descriptor).value
        problem = spec.check(value)
        if problem:
            raise ValueError(f"parameter {problem}")
        values[name] = value
    return values

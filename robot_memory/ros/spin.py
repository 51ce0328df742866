"""The one way our node processes run: init, spin until Ctrl-C / SIGTERM / shutdown,
then let the node finish its work (flush) before the context goes."""

from __future__ import annotations

from typing import Callable

import rclpy
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node


def run_node(make_node: Callable[[], Node], args=None,
             make_executor: Callable[[], Executor] = SingleThreadedExecutor,
             before_destroy: Callable[[Node], None] | None = None) -> None:
    rclpy.init(args=args)
    node = make_node()
    executor = make_executor()  # after init: an executor needs a live context
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if before_destroy is not None:
            before_destroy(node)
        node.destroy_node()
        rclpy.try_shutdown()

"""The do-nothing baseline: a GroundingQuery service that answers at once with an empty
response. Same request and response types as `ground`, its own process."""

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from robot_memory.srv import GroundingQuery


class EchoGroundingServer(Node):
    def __init__(self):
        super().__init__("echo_grounding_server")
        self.create_service(GroundingQuery, "echo_ground", self.on_request)

    def on_request(self, _request, response):
        return response


def main() -> None:
    rclpy.init()
    node = EchoGroundingServer()
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()

"""The do-nothing baseline of the grounding benchmark: a GroundingQuery service named
`echo_ground` that answers at once with an empty response. Same request and response
types as `ground`, in its own process, so the two round trips differ only by what the
grounding server does.

    python -m bench.echo_grounding_server
"""

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from robot_memory.srv import GroundingQuery


class EchoGroundingServer(Node):
    def __init__(self):
        super().__init__("echo_grounding_server")
        self.create_service(GroundingQuery, "echo_ground", self.on_ground_request)

    def on_ground_request(self, _request, response):
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

"""The do-nothing baseline of the grounding benchmark: a GroundingQuery service named
`echo_ground` that answers at once. Same request and response types as `ground`, in its
own process, so the two round trips differ only by what the grounding server does.

With --db (and the identity and request key the benchmark asks about) its answer is the
one `ground` gives for that key, built once at start and sent back unchanged: a
same-payload echo, so the transport of the facts is in the baseline too and the ratio
is what the server itself adds (with --allow-analogies and --property NAME=VALUE, the
ANALOGY answer and its analogies). Without, it answers with an empty response.

    python -m bench.echo_grounding_server [--db URL --identity H --skill S --target T
                                           --environment E
                                           [--allow-analogies --property mass_kg=0.42]]
"""

import argparse

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from bench.grounding_client import measured_property
from robot_memory.grounding.index import GroundingIndex, GroundingRequest
from robot_memory.ros.conversions import analogy_to_msg, fact_to_msg
from robot_memory.srv import GroundingQuery
from robot_memory.store import MemoryStore


def same_payload(args: argparse.Namespace) -> GroundingQuery.Response:
    """The response `ground` gives for the benchmark's request, from the store as it is."""
    store = MemoryStore(args.db)
    index = GroundingIndex(args.identity, store.partition(args.identity).facts())
    store.close()
    answer = index.lookup(GroundingRequest(args.skill, args.target, args.environment,
                                           allow_analogies=args.allow_analogies,
                                           target_properties=tuple(args.property)))
    response = GroundingQuery.Response()
    response.status, response.reason_code, response.reason = (
        answer.status, answer.reason_code, answer.reason)
    response.identity_hash = args.identity
    response.consultation_id = "0" * 32  # as long as the server's
    response.facts = [fact_to_msg(fact) for fact in answer.facts]
    response.analogies = [analogy_to_msg(analogy) for analogy in answer.analogies]
    return response


class EchoGroundingServer(Node):
    def __init__(self, canned: GroundingQuery.Response | None):
        super().__init__("echo_grounding_server")
        self.canned = canned
        self.create_service(GroundingQuery, "echo_ground", self.on_ground_request)

    def on_ground_request(self, _request, response):
        return self.canned if self.canned is not None else response


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name in ("--db", "--identity", "--skill", "--target", "--environment"):
        parser.add_argument(name)
    parser.add_argument("--allow-analogies", action="store_true")
    parser.add_argument("--property", type=measured_property, action="append", default=[])
    args = parser.parse_args()
    canned = same_payload(args) if args.db else None
    rclpy.init()
    node = EchoGroundingServer(canned)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()

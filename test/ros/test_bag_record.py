"""A live topic recorded into a bag and imported: rclpy's own CDR bytes, written with the
`rosbags` writer (there is no rosbag2 recorder among the ROS 2 wheels on PyPI)."""

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import wait_until
from rclpy.node import Node
from robot_memory.msg import ExecutionResult
from rosbags.rosbag2 import StoragePlugin, Writer

from robot_memory.bags.reading import EXECUTION_RESULT_TYPE, make_typestore
from robot_memory.bags.importing import import_bag
from robot_memory.event_kinds import EXECUTION_RESULT
from robot_memory.ros.qos import EXECUTION_RESULTS_QOS
from robot_memory.store import MemoryStore

pytestmark = pytest.mark.ros
PUBLISHER = Path(__file__).with_name("result_publisher.py")


class Recorder(Node):
    """Keeps the serialized messages of one topic with their receive time, as a recorder."""

    def __init__(self, namespace: str, topic: str):
        super().__init__("bag_recorder", namespace=namespace)
        self.received: list[tuple[int, bytes]] = []
        self._lock = threading.Lock()
        self.create_subscription(ExecutionResult, topic, self.on_message,
                                 EXECUTION_RESULTS_QOS, raw=True)

    def on_message(self, data: bytes) -> None:
        with self._lock:
            self.received.append((time.time_ns(), bytes(data)))


@pytest.mark.parametrize("storage", [StoragePlugin.MCAP, StoragePlugin.SQLITE3])
def test_recorded_live_topic_imports_every_message(ros_executor, namespace, tmp_path,
                                                   db_url, certified_hash, storage):
    topic = f"/{namespace}/dock_results"
    recorder = Recorder(namespace, topic)
    ros_executor.add_node(recorder)
    try:
        publisher = subprocess.run([sys.executable, str(PUBLISHER), topic, "30"],
                                   capture_output=True, text=True, timeout=60)
        assert publisher.returncode == 0, publisher.stderr
        wait_until(lambda: len(recorder.received) == 30, 10, "30 recorded messages")
    finally:
        ros_executor.remove_node(recorder)
        recorder.destroy_node()

    typestore = make_typestore()
    bag = tmp_path / "recorded"
    with Writer(bag, version=9, storage_plugin=storage) as writer:
        conn = writer.add_connection(topic, EXECUTION_RESULT_TYPE, typestore=typestore)
        for received_ns, data in recorder.received:
            writer.write(conn, received_ns, data)

    partition = MemoryStore(db_url).partition(certified_hash)
    report = import_bag(partition, bag, progress=False)
    assert (report.imported, report.rejections, report.damage) == (30, [], [])
    events = list(partition.events([EXECUTION_RESULT]))
    assert [e.payload["success"] for e in events] == [i % 3 != 0 for i in range(30)]
    assert events[1].stamp_ns == 5001 * 10**9 + 250
    assert events[0].stamp_ns == recorder.received[0][0]  # zero stamp: the receive time
    assert events[2].payload["parameters"] == {"speed_mps": pytest.approx(0.3)}
    assert import_bag(partition, bag, progress=False).imported == 0

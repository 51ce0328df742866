"""Bags for tests, written with the `rosbags` writer in both rosbag2 storage formats."""

from __future__ import annotations

from pathlib import Path

from rosbags.rosbag2 import StoragePlugin, Writer

from robot_memory.bags.reading import EXECUTION_RESULT_TYPE, make_typestore

STORAGES = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}


def result_msg(store, stamp_ns: int, *, skill="manipulation.grasp", target="glass_cup",
               env="sim_relaxed", zone="shelf_a", force=25.0, success=True, reason="",
               notes="", parameters=None):
    types = store.types
    header = types["std_msgs/msg/Header"](
        stamp=types["builtin_interfaces/msg/Time"](sec=stamp_ns // 10**9,
                                                   nanosec=stamp_ns % 10**9), frame_id="")
    pairs = parameters if parameters is not None else [("force_n", force)]
    return types[EXECUTION_RESULT_TYPE](
        header=header, skill_id=skill, target_class=target, environment=env, zone=zone,
        parameters=[types["robot_memory/msg/KeyValue"](key=k, value=v) for k, v in pairs],
        observations=[], success=success, failure_reason="" if success else reason or "slipped",
        duration_s=1.5, intent_id="", attempt_id="", amends="", notes=notes)


def write_bag(path: Path, storage: str, topics: dict[str, list[tuple[int, object, str]]],
              store=None, compress: bool = False) -> Path:
    """topics: name -> [(receive time ns, message, type name)]."""
    store = store or make_typestore()
    with Writer(path, version=9, storage_plugin=STORAGES[storage]) as writer:
        if compress:
            from rosbags.rosbag2 import CompressionFormat, CompressionMode
            writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        for name, messages in topics.items():
            msgtype = messages[0][2]
            conn = writer.add_connection(name, msgtype, typestore=store)
            for stamp, msg, _ in messages:
                writer.write(conn, stamp, store.serialize_cdr(msg, msgtype))
    return path

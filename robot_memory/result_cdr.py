"""An ExecutionResult's fields read from its serialized (CDR) bytes by rosbags.

The logger takes results from the reader as bytes and has rosbags decode them, instead
of letting rclpy build a message object (a Header, a Time and a KeyValue object per
entry, each through its Python constructor and checked setters): that was the largest
single cost per result. rosbags' objects carry the message's field names, so
`records.message_fields` reads them as it reads rclpy's.

Only what both decoders read alike is read here: plain little-endian CDR (what ROS 2's
DDS middlewares write for these types) and strings without a NUL (rclpy's conversion
cuts a string at its first NUL). For anything else, or bytes that do not parse,
`result_fields_from_cdr` returns None and the caller lets rclpy deserialize them, so it
is rclpy that says what is wrong. ROS-free.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from robot_memory.msg_files import our_msg_dir
from robot_memory.records import message_fields

CDR_LE = b"\x00\x01"  # encapsulation id of plain little-endian CDR (XCDR1)
RESULT_TYPE = "robot_memory/msg/ExecutionResult"
# The standard types a result holds (rosbags' full Kilted store would cost ~6 MB).
STANDARD_DEFINITIONS = {"builtin_interfaces/msg/Time": "int32 sec\nuint32 nanosec\n",
                        "std_msgs/msg/Header": "builtin_interfaces/Time stamp\nstring frame_id\n"}


@lru_cache(maxsize=1)
def _typestore():
    """A rosbags type store holding ExecutionResult and what it is made of, or None
    where the .msg files are nowhere to be found (rclpy then decodes everything)."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore
    msg_dir = our_msg_dir()
    if msg_dir is None:
        return None
    types = {}
    for name, text in STANDARD_DEFINITIONS.items():
        types.update(get_types_from_msg(text, name))
    for name in ("KeyValue", "ExecutionResult"):
        types.update(get_types_from_msg((msg_dir / f"{name}.msg").read_text(),
                                        f"robot_memory/msg/{name}"))
    store = get_typestore(Stores.EMPTY)
    store.register({k: v for k, v in types.items() if k not in store.fielddefs})
    return store


def result_fields_from_cdr(data: bytes) -> dict[str, Any] | None:
    """`message_fields` of the serialized ExecutionResult `data`, or None when rclpy
    must decode it (see above). Raises InvalidRecord for a duplicate key, as
    `message_fields` does."""
    store = _typestore()
    if store is None or data[:2] != CDR_LE:
        return None
    try:
        msg = store.deserialize_cdr(data, RESULT_TYPE)
    except Exception:  # noqa: BLE001 - whatever rosbags cannot read, rclpy judges
        return None
    texts = (msg.header.frame_id, msg.skill_id, msg.target_class, msg.environment, msg.zone,
             msg.failure_reason, msg.intent_id, msg.notes,
             *(kv.key for kv in msg.parameters), *(kv.key for kv in msg.observations))
    if any("\0" in text for text in texts):
        return None
    return message_fields(msg)

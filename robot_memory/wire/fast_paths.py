"""Where a node's hand-written codecs (wire/) were passed over for rclpy's serialization,
and why: said once in the node's log, and kept as a key of its /diagnostics status.

A codec leaves to rclpy what it does not read alike (another encoding, a value rclpy
alone may refuse): the node then works as before, only slower, and nothing else would
tell. ros/diagnostics.py holds one of these per node. ROS-free.
"""

from __future__ import annotations

from collections.abc import Callable

KEY = "fast_path_off.{}"  # the /diagnostics key, per message type


class FastPaths:
    def __init__(self, log: Callable[[str], None]) -> None:
        """`log`: a warning line in the node's log."""
        self._log = log
        self._off: dict[str, tuple[str, int]] = {}  # message type: (first reason, times)

    def off(self, message_type: str, reason: str) -> None:
        """The codec of `message_type` was passed over for rclpy's, for `reason`: logged
        the first time, counted every time."""
        first = self._off.get(message_type)
        if first is None:
            self._off[message_type] = (reason, 1)
            self._log(f"{message_type}: the hand-written CDR codec (robot_memory/wire/) is "
                      f"passed over for rclpy's: {reason}. Shown as "
                      f"{KEY.format(message_type)} on /diagnostics; logged once.")
        else:
            self._off[message_type] = (first[0], first[1] + 1)

    def diagnostic_values(self) -> dict[str, str]:
        """One key per message type passed over: its first reason, and how many times.
        Read from a copy: `off` may run in another thread (the logger's intake)."""
        return {KEY.format(message_type): reason if times == 1 else f"{reason} ({times} times)"
                for message_type, (reason, times) in sorted(dict(self._off).items())}

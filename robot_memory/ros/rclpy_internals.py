"""The one private rclpy attribute the logger uses, kept here so that a change in rclpy
breaks one place, loudly (test/ros/test_rclpy_internals.py runs on Jazzy and Kilted).

The logger's intake thread polls its readers' message-lost events instead of leaving
them to the executor: in the executor's wait set, they left a respawned logger under a
flood of results unable to answer record_event in time. rclpy (7.x on Jazzy, 9.x on
Kilted) offers no public poll: an event handler's `take_data` returns its status only
once the executor's wait has marked it ready, through `_ready_to_take_data`."""

from __future__ import annotations

READY_FLAG = "_ready_to_take_data"


def poll_event(handler):
    """The handler's new status (e.g. QoSMessageLostInfo) if its count changed since the
    last poll, else None. AttributeError if rclpy no longer has the flag."""
    if not hasattr(handler, READY_FLAG):
        raise AttributeError(f"rclpy's {type(handler).__name__} has no {READY_FLAG}: "
                             "robot_memory/ros/rclpy_internals.py needs updating")
    setattr(handler, READY_FLAG, True)
    info = handler.take_data()
    if info is None or getattr(info, "total_count_change", 1) <= 0:
        return None
    return info

"""How the episodic_logger takes results: a thread of its own, not the executor.

The result subscriptions sit in a callback group the executor never runs
(`TakenByIntake`); an `IntakeThread` takes whatever has arrived on them every
`intake_period_s` (ros/episodic_logger.py's take_arrived).
"""

from __future__ import annotations

import threading

from rclpy.callback_groups import CallbackGroup

from robot_memory.operation.log_throttle import LogThrottle, held_back

# Results are taken while fewer than this many wait for the writer; the rest wait in the
# reader's history (config/fastdds_profiles.xml: up to 100,000, each freed once taken) as
# DDS bytes, several times smaller than a result validated, queued and encoded in Python
# (docs/performance.md, "Why the code is shaped this way": what a stalled writer cost
# with 5,000 here and with 1,000). It is well above what a round gathers at the logger's
# sustained intake, so a round at a steady rate never reaches it; past it (a burst, a
# stalled writer), the intake takes again as soon as the writer has caught up to half of
# it (IntakeThread), not a period later. It is also a round's most per topic, so lost
# events are polled.
HOLD_AT_MOST = 1000


class TakenByIntake(CallbackGroup):
    """A callback group the executor never runs. rclpy rebuilds its whole wait set for
    every callback it hands out, which costs far more than a result itself; the result
    subscriptions (and their message-lost events) sit in this group, out of the wait
    set, and the intake thread takes whatever has arrived on them: one wake-up per
    period, not one per result. With their message-lost events in the executor's wait
    set instead, a respawned logger under a flood left record_event calls unanswered
    (test_postgres_stack's kill -9 test): rclpy has no public poll for them, so
    ros/rclpy_internals.py keeps the one private call it takes."""

    def can_execute(self, entity) -> bool:
        return False

    def beginning_execution(self, entity) -> bool:
        return False

    def ending_execution(self, entity) -> None:
        pass


def _taken_by_intake_only(_data) -> None:
    raise AssertionError("the intake thread takes results; the executor never runs this")


class IntakeThread:
    """Calls `take` every `period_s` seconds on a thread of its own until stopped. A round
    that left results in the reader for want of room (`take` returned True) is followed
    by the next one as soon as `room(period_s)` returns (the writer has caught up), so
    that a small bound on what is held in Python does not bound the rate at which a
    backlog is drained.

    Why a thread: the executor's timer did this before, and each of its wake-ups rebuilt
    rclpy's wait set for the whole node, which cost more than the results themselves at
    a few hundred a second (docs/performance.md, "Why the code is shaped this way")."""

    def __init__(self, period_s: float, take, logger, room=None):
        self._period, self._take, self._logger = period_s, take, logger
        self._room = room
        self._throttle = LogThrottle()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="logger-intake", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        backlog = False
        while True:
            if backlog and self._room is not None:
                self._room(self._period)
                if self._stopping.is_set():
                    break
            elif self._stopping.wait(self._period):
                break
            try:
                backlog = bool(self._take())
            except Exception as exc:  # a bad round must not end the intake silently
                backlog = False
                held = self._throttle.admit("intake failed")
                if held is not None:
                    self._logger.error(f"intake failed: {exc!r}{held_back(held)}")

    def stop(self) -> None:
        """Stop, and return once the round in progress (if any) has ended."""
        self._stopping.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()

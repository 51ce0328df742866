"""Waiting for a subscriber before publishing what it must not miss.

A publisher sees a subscription as matched as soon as it has discovered the reader,
but the reader may not have discovered the writer yet; a volatile reader (Fast DDS)
then ignores the first samples, reliable or not (eProsima/Fast-DDS#2641). Discovery
finishes both ways within milliseconds on one host, so a short settle time after
the publisher-side match closes the window. Producers that need proof use the
acknowledged `record_event` service instead.
"""

from __future__ import annotations

import time

from rclpy.publisher import Publisher

SETTLE_S = 0.5


def wait_for_subscriber(publisher: Publisher, timeout_s: float,
                        settle_s: float = SETTLE_S) -> bool:
    """True once a subscriber has matched and the settle time has passed."""
    deadline = time.monotonic() + timeout_s
    while publisher.get_subscription_count() == 0:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    time.sleep(settle_s)
    return True

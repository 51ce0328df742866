"""When a result was received, beside when its producer says it happened.

Decay measures a result's age behind the newest event time of its key, so one result
stamped years ahead (an unset real-time clock, an NTP step, a skill on wall time beside a
simulation) would make every real result of that key look years old. So the log records
each result's receipt time (`received_ns` in its payload: the logger's ROS clock, sim
time in a simulation; a bag's log time; the ingesting machine's clock), and a stamp more
than `max_ahead_ns` ahead of it is not believed: the event is stored at its receipt time,
the producer's stamp kept beside it (`sent_stamp_ns`), and counted as clock_skew. No
single result can then move the newest event time past the receiver's clock plus the
tolerance, and facts stay a function of the log: the event time is what was appended.

A stamp behind its receipt is believed: a result reported late, a bag, history. A stamp
of 0 is no stamp (a producer that left its header unset): the receipt time stands for it.
"""

from __future__ import annotations

from typing import Any

RECEIVED, SENT_STAMP = "received_ns", "sent_stamp_ns"
CLOCK_SKEW = "clock_skew"  # the count of results stored at their receipt time
DEFAULT_MAX_CLOCK_AHEAD_S = 60.0


def at_receipt(payload: dict[str, Any], stamp_ns: int, received_ns: int,
               max_ahead_ns: int) -> tuple[int, bool]:
    """(event time to store, flagged as clock_skew) for a result stamped `stamp_ns` (0:
    not stamped) and received at `received_ns`; records both in `payload`. A receiver
    clock that reads 0 or less is not set yet (sim time before the first /clock): nothing
    is recorded or checked against it."""
    if received_ns <= 0:
        return stamp_ns, False
    payload[RECEIVED] = received_ns
    if not stamp_ns:
        return received_ns, False
    if stamp_ns - received_ns <= max_ahead_ns:
        return stamp_ns, False
    payload[SENT_STAMP] = stamp_ns
    return received_ns, True


def seconds_to_ns(seconds: float) -> int:
    return int(round(seconds * 1e9))

"""At most one log line per kind and period, saying how many it held back.

Every rejection is still counted where it happens (diagnostics); the log says the
first one of each kind at once and then at most one per period, with the number held
back in between. ROS-free.

Why: a node that rejects a flood of results (a skill publishing NaN forces at 1 kHz, a
full backlog) must not spend its CPU on log lines, and a line is dear in rclpy: it
identifies the calling frame on every call, even for a call its `throttle_duration_sec`
then drops (docs/performance.md, "Why the code is shaped this way").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable


class LogThrottle:
    def __init__(self, period_s: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self.period_s = period_s
        self._clock = clock
        self._lock = threading.Lock()  # the intake thread and the executor both log
        self._last: dict[Hashable, float] = {}  # kind -> when its last line was let through
        self._held: dict[Hashable, int] = {}  # kind -> lines held back since then

    def admit(self, kind: Hashable) -> int | None:
        """None: hold this line back (counted). Otherwise log it now; the number is how
        many lines of this kind were held back since the last one let through."""
        now = self._clock()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self.period_s:
                self._held[kind] = self._held.get(kind, 0) + 1
                return None
            self._last[kind] = now
            return self._held.pop(kind, 0)


def held_back(n: int) -> str:
    """The suffix of a line let through after `n` were held back ('' for none)."""
    return f" ({n} more like it since the last such line)" if n else ""

"""Tell a pass whose facts delta was lost from one still on its way.

A holder of facts kept current by `facts_delta` (the grounding server's index) checks
the store's newest run now and then. A newer run than it reflects is usually in flight:
at 1,000 results a second a pass commits every second, and its delta arrives a moment
later. Only a run seen missing at one check and still not reflected at the next is
lost, and worth reloading every fact from the store for.
"""

from __future__ import annotations


class LostDeltaWatch:
    def __init__(self) -> None:
        self._missing_run = 0  # a newer run the store showed at the last check (0: none)

    def check(self, newest_run: int, reflected_run: int) -> int:
        """The run to reload for (its delta was lost), or 0. `newest_run`: the store's
        newest run now; `reflected_run`: the newest the holder reflects."""
        if newest_run <= reflected_run:
            self._missing_run = 0
            return 0
        missing, self._missing_run = self._missing_run, newest_run
        if missing and reflected_run < missing:
            self._missing_run = 0
            return missing
        return 0

"""The runaway-growth guard (from the Long-Term Memory & Knowledge Consolidation
Protocol Spec v0.1): past the limit consolidation pauses and a human
is asked to review; logging goes on up to the hard limit, past which new events are
refused loudly (never dropped silently). A limit of 0 disables that check."""

from __future__ import annotations

from dataclasses import dataclass

OK, OVER_LIMIT, OVER_HARD_LIMIT = "ok", "over_limit", "over_hard_limit"


@dataclass(frozen=True)
class GrowthGuard:
    """The two store-size limits (MB, 0 = none): `limit_mb` pauses consolidation,
    `hard_limit_mb` refuses new events. Pure: the nodes measure, the guard decides."""

    limit_mb: float
    hard_limit_mb: float = 0.0

    def state(self, size_bytes: int) -> str:
        """OK, OVER_LIMIT or OVER_HARD_LIMIT for a store of `size_bytes`."""
        size_mb = size_bytes / (1024 * 1024)
        if self.hard_limit_mb and size_mb >= self.hard_limit_mb:
            return OVER_HARD_LIMIT
        if self.limit_mb and size_mb >= self.limit_mb:
            return OVER_LIMIT
        return OK

    def describe(self, size_bytes: int) -> str:
        """The /diagnostics message for that size: what happens and that a human must
        review (docs/operations.md, "Growth guard")."""
        size_mb = size_bytes / (1024 * 1024)
        state = self.state(size_bytes)
        if state == OVER_HARD_LIMIT:
            return (f"store is {size_mb:.1f} MB, at or above the hard limit "
                    f"{self.hard_limit_mb:g} MB: new events are refused; human review needed")
        if state == OVER_LIMIT:
            return (f"store is {size_mb:.1f} MB, above the growth limit {self.limit_mb:g} MB: "
                    "consolidation paused; human review needed (archive, or reset a tier)")
        return f"store is {size_mb:.1f} MB"

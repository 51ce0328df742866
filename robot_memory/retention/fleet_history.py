"""A robot's history read back with the fleet's copy: the segments its compactions wrote,
taken from the robot's archive folder where they are there and intact, and fetched from
the fleet store (robot_memory/retention/destinations.py) where they are not, into one
folder that `verify --archives`, `replay` and `explain` then read as they read the
robot's own (robot_memory/retention/archives.py).

A fetched copy is checked against the SHA-256 the chain's compaction recorded before it
is put under the segment's name; a segment neither place has is left out, and the
reader names it missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from robot_memory.event_kinds import SEGMENT_FORGOTTEN
from robot_memory.retention.destinations import SegmentDestination
from robot_memory.retention.segments import file_sha256
from robot_memory.retention.shipping import shipped_segments
from robot_memory.store import Partition, compactions


@dataclass
class GatheredSegments:
    identity_hash: str
    local: int = 0
    fetched: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def describe(self) -> str:
        missing = f", {len(self.missing)} in neither place" if self.missing else ""
        return (f"identity {self.identity_hash[:12]}: {self.local} segment(s) on the robot, "
                f"{len(self.fetched)} fetched from the fleet store{missing}")


def gather_segments(partition: Partition, local_dir: Path, destination: SegmentDestination,
                    into: Path) -> GatheredSegments:
    """Put every segment of the identity's compactions into `into` (an empty scratch
    folder): a link to the robot's own copy when it matches its compaction, else a copy
    fetched from `destination` (checked). A segment forgotten on the robot is fetched
    when its shipment's receipt is in the log (the disk budget forgets shipped segments
    first: the fleet still holds them); one forgotten without a receipt is skipped."""
    ident = partition.identity_hash
    with partition.store.read() as conn:
        found = compactions(ident, conn)
        forgotten = {e.payload.get("segment") for e in partition.events(
            kinds=[SEGMENT_FORGOTTEN], conn=conn)}
        shipped = shipped_segments(partition, conn)
    report = GatheredSegments(ident)
    into.mkdir(parents=True, exist_ok=True)
    for c in found:
        if c.segment in forgotten and shipped.get(c.segment) != c.segment_sha256:
            continue
        own, target = Path(local_dir) / c.segment, into / c.segment
        if own.is_file() and file_sha256(own) == c.segment_sha256:
            target.symlink_to(own.resolve())
            report.local += 1
        elif destination.fetch(ident, c.segment, c.segment_sha256, target):
            report.fetched.append(c.segment)
        else:
            report.missing.append(c.segment)
    return report


__all__ = ["GatheredSegments", "gather_segments"]

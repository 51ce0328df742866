"""The disk budget: one limit on everything memory keeps on the robot's disk, and the
deterministic policy that decides which archive segments go when it is reached.

The parts (`measure`): the live store (a SQLite file, its write-ahead log `-wal` and
shared-memory index `-shm`; a server database is not on the robot's disk and counts as
nothing here: its size is the growth guard's), this identity's segments in `archive_dir`,
the other files there (other identities' segments, reset archives), and the witness
file when one is configured.

The policy (`plan`, pure), applied only while the footprint is over the budget, each
step oldest segment first (by chain position):
(a) segments already shipped to the fleet store: a `segment_shipped` receipt in the log
    names the segment and the SHA-256 its compaction recorded ("disk_budget: shipped");
(b) then, only when no fleet store is configured, the oldest segments not shipped
    ("disk_budget: oldest"), and only if that brings the footprint under the budget:
    history no fleet holds is never deleted for nothing.
With a fleet store configured, a segment without a receipt is never deleted.

Each deletion goes through `forget_segment`: a `segment_forgotten` event naming the
segment, its hash and the policy step is logged before the file is removed, so
`verify --archives` skips it as forgotten on purpose. Nothing else is touched: the live
store's rows (overrides, conflicts, safety-relevant failures) stay, and facts never read
segments, so they do not change. When the plan cannot hold the budget, `hold_budget`
says so (`BudgetOutcome.held`), and the caller pauses learning with the diagnosis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from robot_memory.event_kinds import SEGMENT_FORGOTTEN, SEGMENT_SHIPPED
from robot_memory.retention.archives import forget_segment
from robot_memory.store import Partition, compactions
from robot_memory.store.size import MB, store_files

# The parts of the footprint, in the order /diagnostics and the diagnosis name them.
LIVE_STORE, WRITE_AHEAD_LOG, SHARED_MEMORY = "live_store", "write_ahead_log", "shared_memory"
SEGMENTS, OTHER_ARCHIVE_FILES, WITNESS = "segments", "other_archive_files", "witness"
PARTS = (LIVE_STORE, WRITE_AHEAD_LOG, SHARED_MEMORY, SEGMENTS, OTHER_ARCHIVE_FILES, WITNESS)

SHIPPED, OLDEST = "disk_budget: shipped", "disk_budget: oldest"  # the reasons logged
OPERATOR = "robot_memory"  # who forgets under the budget, as the segment_forgotten event says


@dataclass(frozen=True)
class SegmentFile:
    """One of the identity's segments present in archive_dir."""

    segment: str
    sha256: str  # as its compaction recorded it
    from_seq: int
    until_seq: int
    bytes: int
    shipped: bool  # a segment_shipped receipt with this name and hash is in the log


@dataclass(frozen=True)
class Footprint:
    """What memory keeps on the disk: bytes by part (PARTS), and the identity's segments,
    oldest first."""

    parts: dict[str, int]
    segments: tuple[SegmentFile, ...] = ()

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def describe(self) -> str:
        """Each part's size, and the segments not shipped, for a diagnosis."""
        unshipped = [s for s in self.segments if not s.shipped]
        named = ", ".join(f"{part.replace('_', ' ')} {self.parts.get(part, 0) / MB:.1f} MB"
                          for part in PARTS)
        return (f"{named} ({len(self.segments)} segment(s), {len(unshipped)} not shipped: "
                f"{sum(s.bytes for s in unshipped) / MB:.1f} MB)")


@dataclass(frozen=True)
class Deletion:
    segment: SegmentFile
    reason: str  # SHIPPED or OLDEST


@dataclass(frozen=True)
class BudgetPlan:
    """The policy's verdict for one footprint: what to delete, in order, and whether the
    footprint is then within the budget (always, with no budget)."""

    budget_bytes: int
    before: int
    deletions: tuple[Deletion, ...] = ()
    after: int = 0
    held: bool = True


def plan(footprint: Footprint, budget_bytes: int, shipping_configured: bool) -> BudgetPlan:
    """The deterministic policy (the module's docstring): shipped segments oldest first
    while over the budget; then, with no fleet store configured and only if it brings
    the footprint under the budget, the oldest segments not shipped."""
    total = footprint.total
    if budget_bytes <= 0 or total <= budget_bytes:
        return BudgetPlan(budget_bytes, total, (), total, True)
    deletions, after = [], total
    for segment in (s for s in footprint.segments if s.shipped):
        if after <= budget_bytes:
            break
        deletions.append(Deletion(segment, SHIPPED))
        after -= segment.bytes
    unshipped = [s for s in footprint.segments if not s.shipped]
    if after > budget_bytes and not shipping_configured \
            and after - sum(s.bytes for s in unshipped) <= budget_bytes:
        for segment in unshipped:
            if after <= budget_bytes:
                break
            deletions.append(Deletion(segment, OLDEST))
            after -= segment.bytes
    return BudgetPlan(budget_bytes, total, tuple(deletions), after, after <= budget_bytes)


def measure(partition: Partition, archive_dir: Path,
            witness_path: str | Path | None = None) -> Footprint:
    """The footprint now: the store's files, the identity's segments present in
    `archive_dir` (not forgotten; whether each is shipped), the other files there, and
    the witness file (when configured)."""
    archive_dir = Path(archive_dir)
    with partition.store.read() as conn:
        found = compactions(partition.identity_hash, conn)
        forgotten = {e.payload.get("segment") for e in partition.events(
            kinds=[SEGMENT_FORGOTTEN], conn=conn)}
        receipts = {(e.payload.get("segment"), e.payload.get("sha256"))
                    for e in partition.events(kinds=[SEGMENT_SHIPPED], conn=conn)}
    parts = dict.fromkeys(PARTS, 0)
    files = store_files(partition.store)
    parts[LIVE_STORE] = files.get("database", 0)
    parts[WRITE_AHEAD_LOG] = files.get("wal", 0)
    parts[SHARED_MEMORY] = files.get("shm", 0)
    segments = []
    for c in found:
        if c.segment in forgotten:
            continue
        size = _size_or_none(archive_dir / c.segment)
        if size is not None:
            segments.append(SegmentFile(c.segment, c.segment_sha256, c.from_seq, c.until_seq,
                                        size, (c.segment, c.segment_sha256) in receipts))
    parts[SEGMENTS] = sum(s.bytes for s in segments)
    ours = {s.segment for s in segments}
    if archive_dir.is_dir():
        parts[OTHER_ARCHIVE_FILES] = sum(
            size for p in archive_dir.rglob("*")
            if p.name not in ours and (size := _file_size(p)) is not None)
    if witness_path:
        parts[WITNESS] = _size_or_none(Path(witness_path)) or 0
    return Footprint(parts, tuple(segments))


@dataclass
class BudgetOutcome:
    """What `hold_budget` did: the plan, the segments it forgot (in order), and the
    footprint measured afterwards."""

    plan: BudgetPlan
    footprint: Footprint
    forgotten: list[Deletion] = field(default_factory=list)

    @property
    def held(self) -> bool:
        return self.plan.held

    def diagnosis(self, shipping_configured: bool) -> str:
        """Why the budget cannot be held, each part and its size, and what to do."""
        if self.held:
            return ""
        keep = ("a fleet store is configured, so segments not yet shipped stay until a "
                "receipt is logged" if shipping_configured else
                "deleting every segment would not bring it under the budget")
        return (f"{self.plan.after / MB:.1f} MB needed against a budget of "
                f"{self.plan.budget_bytes / MB:g} MB after what the policy may delete; "
                f"{self.footprint.describe()}; {keep}. Do: configure or restore the fleet "
                "store (shipped segments are deleted first), raise disk_budget_mb, lower "
                "retain_events if the live store is the bulk, or forget a segment by hand "
                "(robot-memory forget-segment NAME --operator WHO --reason WHY)")


def hold_budget(partition: Partition, archive_dir: Path, budget_bytes: int, *,
                shipping_configured: bool, witness_path: str | Path | None = None,
                stamp_ns: int | None = None) -> BudgetOutcome:
    """Measure, plan, and forget the planned segments in order (each one logged, then
    deleted), then measure again. A failure part way leaves what was forgotten
    forgotten (each on the record) and raises."""
    archive_dir = Path(archive_dir)
    footprint = measure(partition, archive_dir, witness_path)
    verdict = plan(footprint, budget_bytes, shipping_configured)
    outcome = BudgetOutcome(verdict, footprint)
    if not verdict.deletions:
        return outcome
    for deletion in verdict.deletions:
        forget_segment(partition, archive_dir, deletion.segment.segment, OPERATOR,
                       deletion.reason, stamp_ns)
        outcome.forgotten.append(deletion)
    outcome.footprint = measure(partition, archive_dir, witness_path)
    return outcome


def _size_or_none(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def _file_size(path: Path) -> int | None:
    """A regular file's size (None for a folder, or a file gone meanwhile)."""
    try:
        return path.stat().st_size if path.is_file() else None
    except FileNotFoundError:
        return None


__all__ = ["OLDEST", "OPERATOR", "PARTS", "SHIPPED", "BudgetOutcome", "BudgetPlan", "Deletion",
           "Footprint", "SegmentFile", "hold_budget", "measure", "plan"]

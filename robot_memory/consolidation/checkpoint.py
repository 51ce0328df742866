"""Where consolidation stands, read from the log: the checkpoint (store/checkpoint.py,
the one reader that the pass, the consolidator node, retention and the grounding server
share) and the overrides waiting beyond it."""

from __future__ import annotations

from sqlalchemy import Connection

from robot_memory.consolidation.override_plan import IllShaped, OverridePlan, plan_overrides
from robot_memory.event_kinds import OVERRIDE
from robot_memory.store import FactRow, Partition, StoredEvent
from robot_memory.store.checkpoint import Checkpoint, read_checkpoint

__all__ = ["Checkpoint", "backlog", "facts_at_checkpoint", "ill_shaped_overrides",
           "overrides_waiting", "read_checkpoint", "read_overrides", "result_range"]


def overrides_waiting(partition: Partition, conn: Connection, checkpoint: Checkpoint) -> bool:
    """Is there an override event no pass has applied yet?"""
    latest = partition.latest_event(OVERRIDE, conn=conn)
    return latest is not None and latest.seq > checkpoint.override_seq


def read_overrides(partition: Partition, conn: Connection, until_seq: int,
                   until_stamp_ns: int | None = None) -> list[StoredEvent]:
    """Override events up to a chain position (and event time), in log order."""
    found = list(partition.events([OVERRIDE], until_seq=until_seq, conn=conn))
    if until_stamp_ns is not None:
        found = [e for e in found if e.stamp_ns <= until_stamp_ns]
    return found


def result_range(done_seq: int, plan: OverridePlan, until: int) -> tuple[int, int]:
    """(after, until] of the execution results a pass (or a replay, done_seq 0) folds:
    nothing at or before the last reset, nothing logged after a freeze in force."""
    after = max(done_seq, plan.reset_seq)
    if plan.frozen_since is None:
        return after, until
    return after, max(after, min(until, plan.frozen_since))


# -- for the nodes: each reads one snapshot, and opens no transaction itself ------------
def backlog(partition: Partition) -> tuple[int, bool]:
    """(results logged past the checkpoint, is an override waiting)."""
    with partition.store.read() as conn:
        done = read_checkpoint(partition, conn)
        return (partition.head(conn)[0] - done.done_seq,
                overrides_waiting(partition, conn, done))


def facts_at_checkpoint(partition: Partition) -> tuple[int, list[FactRow]]:
    """(events.id of the newest run, i.e. the facts' version, and the facts)."""
    with partition.store.read() as conn:
        return read_checkpoint(partition, conn).run_event_id, partition.facts(conn=conn)


def ill_shaped_overrides(partition: Partition) -> list[IllShaped]:
    """The overrides in the log that passes and replay skip (fact_schemas.py), in log
    order: what a node names at boot."""
    with partition.store.read() as conn:
        return plan_overrides(read_overrides(partition, conn, partition.head(conn)[0])
                              ).ill_shaped

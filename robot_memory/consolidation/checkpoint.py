"""Where consolidation stands, read from the log: the one checkpoint reader that the
pass, the consolidator node and the grounding server share.

The newest `consolidation_run` event is the checkpoint: its seq and id (the facts'
version), the last chain position whose results it folded (`last_seq`), the last
override it applied (`override_seq`, older runs lack it: then `last_seq`) and the digest
of the semantic tier it left (`digest`, store/tier_digest.py; older runs lack it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from robot_memory.consolidation.override_plan import IllShaped, OverridePlan, plan_overrides
from robot_memory.event_kinds import CONSOLIDATION_RUN, OVERRIDE
from robot_memory.store import RUN_DIGEST_KEY, FactRow, Partition, StoredEvent


@dataclass(frozen=True)
class Checkpoint:
    run_seq: int = 0  # chain position of the newest run event (0 before any pass)
    run_event_id: int = 0  # its events.id: the version of the facts
    done_seq: int = 0  # results up to here are folded
    override_seq: int = 0  # overrides up to here are applied
    # The tier digest the run recorded, as recorded (None: a run before tier digests).
    digest: Any = None
    # The rules the run consolidated with (None before any pass): the store's version.
    rule_version: str | None = None


def read_checkpoint(partition: Partition, conn: Connection) -> Checkpoint:
    run = partition.latest_payload_json(CONSOLIDATION_RUN, conn)
    if run is None:
        return Checkpoint()
    seq, event_id, payload_json = run
    payload = _leading_fields(payload_json)
    done = int(payload["last_seq"])
    return Checkpoint(seq, event_id, done, int(payload.get("override_seq", done)),
                      payload.get(RUN_DIGEST_KEY), _rule_version(payload_json))


# A run payload is canonical JSON (keys sorted) whose keys before "reset" hold only
# numbers, booleans and the tier digest (counts and hex digits): last_seq, override_seq
# and the digest among them. Its "touched_facts" list
# (every fact key the run wrote: 10^4 after a full pass) is not decoded on every tick.
_AFTER_POSITIONS = ',"reset":'


_RULE_VERSION = '"rule_version":"'


def _rule_version(payload_json: str) -> str | None:
    """The run's rule_version, read from its text: the key follows "reset" (keys sorted)
    and precedes "skipped" and "touched_facts", so its first appearance past "reset" is
    the run's own (a quote inside a string value is escaped, so no value can spell it)."""
    _, found, tail = payload_json.partition(_AFTER_POSITIONS)
    at = tail.find(_RULE_VERSION) if found else -1
    if at < 0:
        return json.loads(payload_json).get("rule_version")
    start = at + len(_RULE_VERSION)
    return tail[start:tail.index('"', start)]


def _leading_fields(payload_json: str) -> dict:
    head, found, _ = payload_json.partition(_AFTER_POSITIONS)
    if found:
        try:
            return json.loads(head + "}")
        except ValueError:
            pass
    return json.loads(payload_json)  # a run written without "reset" (older releases)


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

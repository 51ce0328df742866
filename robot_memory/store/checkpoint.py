"""The passes' checkpoint, read from the log: the newest `consolidation_run` event.

Its seq and id (the facts' version), the last chain position whose results it folded
(`last_seq`), the last override it applied (`override_seq`, older runs lack it: then
`last_seq`) and the digest of the semantic tier it left (`digest`, tier_digest.py; older
runs lack it). In the store, below consolidation, because retention reads it too: a
compaction reaches no further than what the passes have folded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from robot_memory.event_kinds import CONSOLIDATION_RUN
from robot_memory.store.partition import Partition
from robot_memory.store.tier_digest import RUN_DIGEST_KEY


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

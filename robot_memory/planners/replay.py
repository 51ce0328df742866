"""`replay_facts`: the verified identity's facts at a point of its log, for a model.

The running stack has no replay service, so the tool reads the store itself, as
`robot-memory replay` does, but only for the stack it is bound to: the identity the
stack's verifier verified, in the store the verifier checked (the same store id), with
the rules the running consolidator runs. Anything else is refused before a row is read.
Replay rebuilds facts in memory; it writes nothing to the store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from robot_memory.consolidation import RulesConfig, replay_snapshot
from robot_memory.planners.answers import refused, render_replay
from robot_memory.store import MemoryStore, compactions


def _sqlite_file_missing(url: str) -> str | None:
    """The path of a SQLite file URL whose file does not exist (opening would create an
    empty store), else None."""
    from sqlalchemy.engine import make_url
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or \
            parsed.database == ":memory:":
        return None
    return None if Path(parsed.database).exists() else parsed.database


def replay_facts(db_url: str, identity_hash: str, stack_store_id: str, until_event_id: int,
                 until_time_s: float, rule_settings: dict[str, Any]) -> str:
    """The text of a replay, or of why there is none. `identity_hash` and
    `stack_store_id` are what the stack's verifier published; `rule_settings` the
    consolidator's parameters by name; exactly one of `until_event_id` (> 0) and
    `until_time_s` (> 0) bounds the replay."""
    if not db_url:
        return refused("replay_facts", "this server was started without --db, so it cannot "
                       "read the log (start `robot-memory mcp --db URL`)")
    missing = _sqlite_file_missing(db_url)
    if missing:
        return refused("replay_facts", f"no store at {missing}")
    store = MemoryStore(db_url)
    try:
        if store.store_id != stack_store_id:
            return refused("replay_facts", f"--db is store {store.store_id}, the running "
                           f"stack verified store {stack_store_id}")
        partition = store.partition(identity_hash)
        with store.read() as conn:
            if compactions(identity_hash, conn):
                return refused("replay_facts", "part of this log was compacted into archive "
                               "segments; replay it with `robot-memory replay --archive-dir`")
        until_seq, until_stamp_ns, where = None, None, ""
        if until_event_id:
            event = partition.event_by_id(until_event_id)
            if event is None:
                return refused("replay_facts", f"until_event_id: no event {until_event_id} "
                               "in this identity's log")
            until_seq, where = event.seq, f"after event {until_event_id}"
        else:
            until_stamp_ns, where = int(round(until_time_s * 1e9)), \
                f"at event time {until_time_s:g} s"
        snapshot = replay_snapshot(partition, RulesConfig.from_settings(rule_settings),
                                   until_seq=until_seq, until_stamp_ns=until_stamp_ns)
    finally:
        store.close()
    return render_replay(json.loads(snapshot), identity_hash, where)

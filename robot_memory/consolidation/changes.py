"""What a pass writes for a fact: the change from the stored row to the finalized
rendered fact (none when they are the same), its row to write and the
knowledge_conflict event a status change makes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from robot_memory.canonical import plain_canonical_json
from robot_memory.consolidation.rules import (RULE_VERSIONS, STATUS_CONTESTED,
                                              STATUS_INVALIDATED, RenderedFact)
from robot_memory.event_kinds import KNOWLEDGE_CONFLICT, KNOWLEDGE_CONFLICT_RESOLVED
from robot_memory.store import FactRow, FactWrite, Partition

GroupId = tuple[str, str]  # (fact kind, group key)


@dataclass(frozen=True, slots=True)
class FactChange:
    """A fact a pass writes: the row it writes (`new`: the old row's id, or None for a
    fact new to the store) in place of the stored row `old`. The new value travels as
    its canonical JSON (what is stored), not as nested dicts: a pass over 10^4 keys
    holds 10^4 of these."""

    old: FactRow | None
    new: FactRow
    # Statistics of the contradiction test, when it ran (for the knowledge_conflict event).
    conflict: dict[str, Any] | None = None

    @property
    def kind(self) -> str:
        return self.new.kind

    @property
    def key(self) -> str:
        return self.new.key

    @property
    def value_json(self) -> str:
        return self.new.value_json

    @property
    def new_value(self) -> dict[str, Any]:
        """The new value, parsed for this look (not kept)."""
        return json.loads(self.new.value_json)


def _same(old: FactRow, fact: RenderedFact, value_json: str) -> bool:
    return (old.value_json == value_json and old.status == fact.status
            and old.rule_version == fact.rule_version
            and old.confidence == fact.confidence and old.n_observations == fact.n_observations
            and old.last_supporting_event_id == fact.last_supporting_event_id
            and old.last_updated_ns == fact.last_updated_ns)


def conflict_event(change: FactChange) -> dict[str, Any] | None:
    """The knowledge_conflict(_resolved) event of a change into or out of contested."""
    was = change.old.status if change.old else None
    now = change.new.status
    if STATUS_INVALIDATED in (was, now) or change.new.rule_version not in RULE_VERSIONS:
        return None  # an operator's doing, logged as the override itself
    if now == STATUS_CONTESTED and was != STATUS_CONTESTED:
        kind = KNOWLEDGE_CONFLICT
    elif was == STATUS_CONTESTED and now != STATUS_CONTESTED:
        kind = KNOWLEDGE_CONFLICT_RESOLVED
    else:
        return None
    return {"event_kind": kind, "fact_kind": change.kind, "fact_key": change.key,
            "status": {"from": was, "to": now}, "test": change.conflict}


def fact_change(key: GroupId, fact: RenderedFact | None, old: FactRow | None
                ) -> FactChange | None:
    """The change to write for this key, if the finalized fact differs from the row."""
    if fact is None:
        return None
    value_json = plain_canonical_json(fact.value)
    if old is not None and _same(old, fact, value_json):
        return None
    return FactChange(old=old, new=fact.stored_as(old.id if old else None, value_json),
                      conflict=fact.conflict)


def fact_write(change: FactChange) -> FactWrite:
    return change.new.as_write()


def facts_written(partition: Partition, changes: list[FactChange]) -> list[FactRow]:
    """The rows a committed pass left for its changes, in (kind, key) order. A changed
    fact's row is the change's own (its id was the old row's), so only facts new to
    the store, whose ids the store gave, are read back (reading back every changed fact
    was a good part of what a pass cost at a steady stream of results)."""
    rows = {}
    new_keys = set()
    for change in changes:
        if change.old is None:
            new_keys.add((change.kind, change.key))
        else:
            rows[(change.kind, change.key)] = change.new
    if new_keys:
        with partition.store.read() as conn:
            rows.update(((f.kind, f.key), f) for f in partition.facts_by_key(new_keys, conn))
    return [rows[key] for key in sorted(rows)]

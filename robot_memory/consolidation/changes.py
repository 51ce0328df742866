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
from robot_memory.store import FactRow, FactWrite, Partition, fact_row_from_columns

GroupId = tuple[str, str]  # (fact kind, group key)


@dataclass(frozen=True)
class FactChange:
    """A fact a pass writes. The new value travels as its canonical JSON (what is
    stored), not as nested dicts: a pass over 10^4 keys holds 10^4 of these."""

    kind: str
    key: str
    old: FactRow | None
    new: RenderedFact  # its value is left out (None): see value_json / new_value
    value_json: str

    @property
    def new_value(self) -> dict[str, Any]:
        return json.loads(self.value_json)


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
            "status": {"from": was, "to": now}, "test": change.new.conflict}


def fact_change(key: GroupId, fact: RenderedFact | None, old: FactRow | None
                ) -> FactChange | None:
    """The change to write for this key, if the finalized fact differs from the row."""
    if fact is None:
        return None
    value_json = plain_canonical_json(fact.value)
    if old is not None and _same(old, fact, value_json):
        return None
    return FactChange(key[0], key[1], old, _without_value(fact), value_json)


def _without_value(fact: RenderedFact) -> RenderedFact:
    """A copy of the fact with its value left out, made through its __dict__: the frozen
    dataclass's __init__ costs 3x as much (dataclasses.replace 30x), once per change."""
    lean = object.__new__(RenderedFact)
    lean.__dict__.update(fact.__dict__, value=None)
    return lean


def fact_write(change: FactChange) -> FactWrite:
    fact = change.new
    return FactWrite(change.old.id if change.old else None, change.kind, change.key,
                     change.value_json, fact.status, fact.confidence, fact.n_observations,
                     fact.rule_version, fact.last_supporting_event_id, fact.last_updated_ns)


def facts_written(partition: Partition, changes: list[FactChange]) -> list[FactRow]:
    """The rows a committed pass left for its changes, in (kind, key) order. A changed
    fact's row is the change itself (its id was the old row's), so only facts new to
    the store, whose ids the store gave, are read back: at 1,000 results a second,
    reading back every changed fact was a tenth of what a pass cost."""
    rows = {}
    new_keys = set()
    for change in changes:
        if change.old is None:
            new_keys.add((change.kind, change.key))
            continue
        fact = change.new
        rows[(change.kind, change.key)] = fact_row_from_columns((
            change.old.id, change.kind, change.key, change.value_json, fact.status,
            fact.confidence, fact.n_observations, fact.rule_version,
            fact.last_supporting_event_id, fact.last_updated_ns))
    if new_keys:
        with partition.store.read() as conn:
            rows.update(((f.kind, f.key), f) for f in partition.facts_by_key(new_keys, conn))
    return [rows[key] for key in sorted(rows)]

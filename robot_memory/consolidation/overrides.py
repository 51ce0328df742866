"""Human overrides (Long-Term Memory & Knowledge Consolidation Protocol Spec v0.1): operators correct the memory without rewriting history.

Every override is an `override` event in the episodic log (who, why, what); the
consolidation pass and replay read them from the log in order, so replay reproduces
their effect byte for byte. Nothing here edits the log or a fact row directly.

- operator_fact: a fact given by an operator, marked as such (rule_version
  `operator/1`, value `source: operator`), served like an active fact. Later robot
  evidence for that key keeps being counted but does not replace it.
- invalidate: the fact keeps updating from evidence but its status stays
  `invalidated`: excluded from grounding, kept in the table.
- freeze / unfreeze: while frozen, passes fold no execution result logged after the
  freeze (other overrides still apply); after unfreeze the next pass catches up.
- reset_semantic: the identity's facts and consolidation state are archived to a file
  (its SHA-256 in the event) and dropped; learning starts over from the events after it.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select

from robot_memory.canonical import canonical_json
from robot_memory.consolidation.rules import FACT_KINDS, STATUS_ACTIVE, STATUS_INVALIDATED
from robot_memory.consolidation.rules.base import RenderedFact
from robot_memory.errors import InputError
from robot_memory.event_kinds import OVERRIDE
from robot_memory.store.episodic import FactRow, Partition, StoredEvent
from robot_memory.store.schema import consolidation_state

OPERATOR_FACT, INVALIDATE, FREEZE, UNFREEZE, RESET_SEMANTIC = (
    "operator_fact", "invalidate", "freeze", "unfreeze", "reset_semantic")
ACTIONS = (OPERATOR_FACT, INVALIDATE, FREEZE, UNFREEZE, RESET_SEMANTIC)
OPERATOR_RULE_VERSION = "operator/1"


class OverrideError(InputError):
    """An override that cannot be recorded; says which field and why."""


@dataclass
class OverridePlan:
    """What the overrides up to a point of the log mean for consolidation."""

    reset_seq: int = 0  # results at or before the last reset are never folded again
    frozen_since: int | None = None  # seq of the freeze in force, if frozen
    operator_facts: dict[tuple[str, str], RenderedFact] = field(default_factory=dict)
    invalidated: set[tuple[str, str]] = field(default_factory=set)
    keys_after: dict[int, set[tuple[str, str]]] = field(default_factory=dict)

    def keys_changed_after(self, seq: int) -> set[tuple[str, str]]:
        """Fact keys named by overrides logged after `seq` (since the last reset)."""
        return {key for at, keys in self.keys_after.items() if at > seq for key in keys}

    def finalize(self, key: tuple[str, str], evidence: RenderedFact | None
                 ) -> RenderedFact | None:
        """The fact for this key once overrides are applied to what evidence says."""
        fact = self.operator_facts.get(key, evidence)
        if fact is not None and key in self.invalidated:
            fact = RenderedFact(fact.kind, fact.key, fact.value, STATUS_INVALIDATED,
                                fact.confidence, fact.n_observations,
                                fact.last_supporting_event_id, fact.last_updated_ns,
                                None, fact.rule_version)
        return fact


def plan_overrides(overrides: list[StoredEvent]) -> OverridePlan:
    """Fold override events (in log order) into a plan; a reset clears what came before."""
    plan = OverridePlan()
    for event in overrides:
        action, payload = event.payload["action"], event.payload
        if action == RESET_SEMANTIC:
            frozen = plan.frozen_since
            plan = OverridePlan(reset_seq=event.seq, frozen_since=frozen)
        elif action == FREEZE:
            plan.frozen_since = plan.frozen_since or event.seq
        elif action == UNFREEZE:
            plan.frozen_since = None
        elif action in (OPERATOR_FACT, INVALIDATE):
            key = (payload["fact_kind"], payload["fact_key"])
            plan.keys_after.setdefault(event.seq, set()).add(key)
            if action == OPERATOR_FACT:
                plan.operator_facts[key] = operator_fact(event)
                plan.invalidated.discard(key)
            else:
                plan.invalidated.add(key)
    return plan


def operator_fact(event: StoredEvent) -> RenderedFact:
    payload = event.payload
    value = {**payload["value"], "source": "operator", "operator": payload["operator"],
             "reason": payload["reason"]}
    return RenderedFact(payload["fact_kind"], payload["fact_key"], value, STATUS_ACTIVE,
                        float(payload["confidence"]), 0, event.id, event.stamp_ns, None,
                        OPERATOR_RULE_VERSION)


def fact_as_rendered(row: FactRow) -> RenderedFact:
    return RenderedFact(row.kind, row.key, row.value, row.status, row.confidence,
                        row.n_observations, row.last_supporting_event_id, row.last_updated_ns,
                        None, row.rule_version)


def override_events(partition: Partition, conn, until_seq: int,
                    until_stamp_ns: int | None = None) -> list[StoredEvent]:
    events = list(partition.events([OVERRIDE], until_seq=until_seq, conn=conn))
    if until_stamp_ns is not None:
        events = [e for e in events if e.stamp_ns <= until_stamp_ns]
    return events


# -- recording overrides (CLI and the consolidator's `override` service) --------------
def _base(action: str, operator: str, reason: str) -> dict[str, Any]:
    if not operator.strip():
        raise OverrideError("operator: required (who takes responsibility)")
    if not reason.strip():
        raise OverrideError("reason: required (why; it stays in the log)")
    return {"action": action, "operator": operator, "reason": reason}


def record_operator_fact(partition: Partition, operator: str, reason: str, kind: str,
                         key: str, value: dict[str, Any], confidence: float,
                         stamp_ns: int) -> StoredEvent:
    payload = _base(OPERATOR_FACT, operator, reason)
    if kind not in FACT_KINDS:
        raise OverrideError(f"kind: {kind!r} is not one of {list(FACT_KINDS)}")
    if not key.strip():
        raise OverrideError("key: required, e.g. 'manipulation.grasp + glass_cup + sim'")
    if not isinstance(value, dict) or not value:
        raise OverrideError("value: a non-empty JSON object is required")
    if not (isinstance(confidence, (int, float)) and math.isfinite(confidence)
            and 0.0 <= confidence <= 1.0):
        raise OverrideError(f"confidence: {confidence!r} is not in [0, 1]")
    canonical_json(value)  # refuses NaN and non-JSON values here, not in a pass
    payload.update({"fact_kind": kind, "fact_key": key, "value": value,
                    "confidence": float(confidence)})
    return partition.append(OVERRIDE, payload, stamp_ns)


def record_invalidation(partition: Partition, operator: str, reason: str, fact: FactRow,
                        stamp_ns: int) -> StoredEvent:
    payload = _base(INVALIDATE, operator, reason)
    payload.update({"fact_kind": fact.kind, "fact_key": fact.key, "fact_id": fact.id})
    return partition.append(OVERRIDE, payload, stamp_ns)


def record_freeze(partition: Partition, operator: str, reason: str, frozen: bool,
                  stamp_ns: int) -> StoredEvent:
    return partition.append(OVERRIDE, _base(FREEZE if frozen else UNFREEZE, operator, reason),
                            stamp_ns)


def default_archive_path(partition: Partition) -> Path:
    url = partition.store.url
    folder = Path(url[len("sqlite:///"):]).parent if url.startswith("sqlite:///") else Path(".")
    head = partition.head()[0]
    return folder / f"robot_memory_archive_{partition.identity_hash[:12]}_seq{head}.json"


def record_reset(partition: Partition, operator: str, reason: str, stamp_ns: int,
                 archive_path: Path | None = None) -> StoredEvent:
    """Archive the semantic tier to a file, then log the reset with the file's hash; the
    next pass drops the rows and starts learning over."""
    payload = _base(RESET_SEMANTIC, operator, reason)
    path = Path(archive_path) if archive_path else default_archive_path(partition)
    if path.exists():
        raise OverrideError(f"archive: {path} exists; choose another path")
    with partition.store.read() as conn:
        head_seq = partition.head(conn)[0]
        facts = partition.facts(conn=conn)
        states = conn.execute(select(consolidation_state.c.fact_kind,
                                     consolidation_state.c.fact_key,
                                     consolidation_state.c.state_json)
                              .where(consolidation_state.c.identity_hash
                                     == partition.identity_hash)
                              .order_by(consolidation_state.c.fact_kind,
                                        consolidation_state.c.fact_key)).all()
    archive = {"identity_hash": partition.identity_hash, "head_seq": head_seq,
               "facts": [{"kind": f.kind, "key": f.key, "status": f.status,
                          "confidence": f.confidence, "n_observations": f.n_observations,
                          "rule_version": f.rule_version, "value": f.value} for f in facts],
               "consolidation_state": [{"kind": k, "key": g, "state": json.loads(s)}
                                       for k, g, s in states]}
    text = canonical_json(archive)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    payload.update({"archive_path": str(path.resolve()),
                    "archive_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
                    "facts": len(facts), "states": len(states)})
    return partition.append(OVERRIDE, payload, stamp_ns)



def record_override(partition: Partition, action: str, operator: str, reason: str,
                    stamp_ns: int, *, fact_id: int = 0, kind: str = "", key: str = "",
                    value_json: str = "", confidence: float = 1.0,
                    archive_path: str = "") -> StoredEvent:
    """One entry point for an override given as plain fields (the ROS service)."""
    if action == OPERATOR_FACT:
        try:
            value = json.loads(value_json)
        except json.JSONDecodeError as exc:
            raise OverrideError(f"value_json: not JSON: {exc}") from exc
        return record_operator_fact(partition, operator, reason, kind, key, value,
                                    confidence, stamp_ns)
    if action == INVALIDATE:
        wanted = (lambda f: f.id == fact_id) if fact_id else \
            (lambda f: (f.kind, f.key) == (kind, key))
        found = [f for f in partition.facts() if wanted(f)]
        if not found:
            raise OverrideError(f"no fact {f'id {fact_id}' if fact_id else f'{kind} [{key}]'} "
                                f"for identity {partition.identity_hash[:12]}")
        return record_invalidation(partition, operator, reason, found[0], stamp_ns)
    if action in (FREEZE, UNFREEZE):
        return record_freeze(partition, operator, reason, action == FREEZE, stamp_ns)
    if action == RESET_SEMANTIC:
        return record_reset(partition, operator, reason, stamp_ns,
                            Path(archive_path) if archive_path else None)
    raise OverrideError(f"action: {action!r} is not one of {list(ACTIONS)}")

"""Recording human overrides as `override` events (the CLI and the consolidator's
`override` service): checked here, applied by the next consolidation pass."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from robot_memory.errors import InputError
from robot_memory.canonical import canonical_json
from robot_memory.consolidation.fact_schemas import value_problem
from robot_memory.consolidation.override_privacy import screen_override
from robot_memory.consolidation.override_plan import (ACTIONS, FREEZE, INVALIDATE,
                                                      OPERATOR_FACT, RESET_SEMANTIC, UNFREEZE)
from robot_memory.consolidation.rules import FACT_KINDS
from robot_memory.event_kinds import OVERRIDE
from robot_memory.store import FactRow, Partition, StoredEvent


class OverrideError(InputError):
    """An override that cannot be recorded; says which field and why."""


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
    problem = value_problem(kind, value)  # the kind's one shape (fact_schemas.py)
    if problem is not None:
        raise OverrideError(str(problem))
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
        states = partition.all_consolidation_states(conn)
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
    screen_override(partition, stamp_ns, operator=operator, reason=reason, kind=kind,
                    key=key, value=value_json, archive_path=archive_path)
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

"""Facets of an execution result: the typed columns the consolidation rules group and
count by, derived from the canonical payload when the event is appended (or by the
schema-2 migration), so that no pass decodes JSON."""

from __future__ import annotations

import json
from typing import Any

from robot_memory.records import InvalidRecord, record_from_payload
from robot_memory.store.schema import OBSERVATION, PARAMETER


def facet_rows(event_id: int, identity_hash: str, seq: int, stamp_ns: int,
               payload_json: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(result_facets row, result_values rows) of one stored execution_result.

    Decoded from the stored canonical bytes, exactly as a pass over the payloads would
    read them; a payload the rules cannot read gets only its invalid_reason."""
    row = {"event_id": event_id, "identity_hash": identity_hash, "seq": seq,
           "stamp_ns": stamp_ns, "skill_id": "", "target_class": "", "environment": "",
           "zone": "", "success": 0, "failure_reason": "", "has_observations": 0,
           "invalid_reason": None}
    try:
        record = record_from_payload(json.loads(payload_json), stamp_ns)
    except InvalidRecord as exc:
        row["invalid_reason"] = exc.reason
        return row, []
    row.update(skill_id=record.skill_id, target_class=record.target_class,
               environment=record.environment, zone=record.zone, success=int(record.success),
               failure_reason=record.failure_reason,
               has_observations=int(bool(record.observations)))
    values = [{"event_id": event_id, "source": PARAMETER, "name": name,
               "value_repr": repr(float(value))} for name, value in record.parameters.items()]
    values += [{"event_id": event_id, "source": OBSERVATION, "name": name,
                "value_repr": repr(float(value))} for name, value in record.observations.items()]
    return row, values

"""What the HTML report shows, read from one identity's store in one snapshot."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from robot_memory.consolidation.rules.base import fact_key
from robot_memory.event_kinds import (
    CONSOLIDATION_RUN,
    EXECUTION_RESULT,
    FACT_CONSULTATION,
    IDENTITY_VERIFICATION,
    IMPORT,
    KNOWLEDGE_CONFLICT,
    KNOWLEDGE_CONFLICT_RESOLVED,
    OVERRIDE,
)
from robot_memory.store import FactRow, Partition

ALL_KINDS = (EXECUTION_RESULT, CONSOLIDATION_RUN, KNOWLEDGE_CONFLICT,
             KNOWLEDGE_CONFLICT_RESOLVED, FACT_CONSULTATION, IDENTITY_VERIFICATION, OVERRIDE,
             IMPORT, "privacy_rejection")


@dataclass
class Outcomes:
    """One skill x target x environment's results in event-time order."""

    stamps: list[int] = field(default_factory=list)
    successes: list[bool] = field(default_factory=list)
    parameters: list[dict[str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class StatusChange:
    stamp_ns: int
    status: str  # candidate, active, contested, invalidated
    why: str


@dataclass
class ReportData:
    identity_hash: str
    head: tuple[int, str]
    facts: list[FactRow]
    outcomes: dict[str, Outcomes]
    changes: dict[tuple[str, str], list[StatusChange]]
    consultations: Counter  # (kind, key) -> answers that served it
    requesters: dict[tuple[str, str], Counter]
    event_counts: dict[str, int]
    last_verification: Any  # StoredEvent | None
    last_run: Any
    imports: list[Any]
    first_stamp_ns: int


def read_report_data(partition: Partition) -> ReportData:
    outcomes: dict[str, Outcomes] = defaultdict(Outcomes)
    changes: dict[tuple[str, str], list[StatusChange]] = defaultdict(list)
    consultations: Counter = Counter()
    requesters: dict[tuple[str, str], Counter] = defaultdict(Counter)
    with partition.store.read() as conn:
        head = partition.head(conn)
        facts = partition.facts(conn)
        for _id, _seq, stamp, text in partition.payload_rows(EXECUTION_RESULT, 0, head[0], conn):
            payload = json.loads(text)
            series = outcomes[fact_key(payload.get("skill_id", ""),
                                       payload.get("target_class", ""),
                                       payload.get("environment", ""))]
            series.stamps.append(stamp)
            series.successes.append(bool(payload.get("success")))
            series.parameters.append(payload.get("parameters") or {})
        for event in partition.events([KNOWLEDGE_CONFLICT, KNOWLEDGE_CONFLICT_RESOLVED,
                                       OVERRIDE, FACT_CONSULTATION], conn=conn):
            payload = event.payload
            if event.kind == FACT_CONSULTATION:
                for served in payload.get("facts", []):
                    key = (served.get("kind", ""), served.get("key", ""))
                    consultations[key] += 1
                    requesters[key][payload.get("requester") or "(unnamed)"] += 1
            elif event.kind == OVERRIDE:
                if payload.get("action") == "invalidate":
                    changes[(payload["fact_kind"], payload["fact_key"])].append(StatusChange(
                        event.stamp_ns, "invalidated", f"by {payload.get('operator')}"))
            else:
                changes[(payload["fact_kind"], payload["fact_key"])].append(StatusChange(
                    event.stamp_ns, payload["status"]["to"],
                    f"z = {payload.get('test', {}).get('z')}"))
        counts = {kind: 0 for kind in ALL_KINDS}
        verification = partition.latest_event(IDENTITY_VERIFICATION, conn=conn)
        last_run = partition.latest_event(CONSOLIDATION_RUN, conn=conn)
        imports = list(partition.events([IMPORT], conn=conn))
    for kind in ALL_KINDS:
        counts[kind] = partition.count_events(kind)
    counts["all"] = head[0]
    first = min((min(s.stamps) for s in outcomes.values()), default=0)
    return ReportData(partition.identity_hash, head, facts, dict(outcomes), dict(changes),
                      consultations, dict(requesters), counts, verification, last_run,
                      imports, first)


def promotion_changes(series: Outcomes, promotion_min: int) -> list[StatusChange]:
    """When the fact became a candidate (first result) and active (enough results)."""
    stamps = sorted(series.stamps)  # the log's order need not be event-time order
    found = [StatusChange(stamps[0], "candidate", "first result")]
    if len(stamps) >= promotion_min:
        found.append(StatusChange(stamps[promotion_min - 1], "active",
                                  f"{promotion_min} results"))
    return found

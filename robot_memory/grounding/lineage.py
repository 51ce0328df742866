"""The lineage of an action: what the planner was told for one intent, what the robot
then did, and what it moved in memory (`robot-memory explain --intent`, and the
`explain` service with an intent_id).

Read through the intent index (store/intents.py), never by scanning the log:
- every grounding consultation made for the intent, with the facts served and their
  rule versions (and what was lent by analogy or blended from fleet priors);
- every execution result carrying the intent (an amendment of another attempt
  included: it says which attempt it amends);
- for each result, the consolidation run that folded it (the first run after it whose
  range holds it; none yet if no pass has read it) and the facts of that run it
  moved: those the result supports by the run's rules, as they stand now.

Events that compactions removed from the live store are not listed; the lineage says
up to which chain position history was compacted. Of an intent with more than
MAX_LINEAGE_EVENTS events, the newest are listed and the others counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection

from robot_memory.consolidation.partials import fact_keys_of_result
from robot_memory.consolidation.rules import (DEFAULT_RULE_VERSION, RULE_VERSIONS, RulesConfig,
                                              rules_for)
from robot_memory.errors import InputError
from robot_memory.event_kinds import CONSOLIDATION_RUN, EXECUTION_RESULT, FACT_CONSULTATION
from robot_memory.store import (AMENDMENT_APPLIED, AMENDMENT_SUPERSEDED, Partition, StoredEvent,
                                compactions)

# Runs read per statement while looking for the one that folded a result (usually the
# first after it).
RUN_BATCH = 8
# The events of one intent a lineage lists, newest first kept: a plan step has a few; an
# intent id reused for every request (a planner that never changes it) would otherwise
# make an answer as large as the log. The rest are counted.
MAX_LINEAGE_EVENTS = 200


class IntentNotFound(InputError):
    """Raised when no live event of this identity carries the given intent_id."""


def _consultation(event_id: int, seq: int, stamp_ns: int, payload: dict[str, Any]
                  ) -> dict[str, Any]:
    entry = {"event_id": event_id, "seq": seq, "stamp_ns": stamp_ns,
             "consultation_id": payload.get("consultation_id"),
             "requester": payload.get("requester"), "status": payload.get("status"),
             "reason_code": payload.get("reason_code"), "query": payload.get("query"),
             "facts": [{"fact_id": f.get("fact_id"), "kind": f.get("kind"),
                        "key": f.get("key"), "rule_version": f.get("rule_version")}
                       for f in payload.get("facts", ())]}
    if payload.get("analogies"):
        entry["analogies"] = payload["analogies"]
    if payload.get("priors"):
        entry["priors"] = payload["priors"]
    return entry


_RESULT_FIELDS = ("skill_id", "target_class", "environment", "zone", "success",
                  "failure_reason", "duration_s", "parameters", "observations", "attempt_id",
                  "amends")


def _result(event_id: int, seq: int, stamp_ns: int, payload: dict[str, Any]) -> dict[str, Any]:
    entry = {"event_id": event_id, "seq": seq, "stamp_ns": stamp_ns}
    entry.update({name: payload[name] for name in _RESULT_FIELDS if name in payload})
    return entry


def _runs_after(partition: Partition, seq: int, conn: Connection) -> Iterator[StoredEvent]:
    return partition.events([CONSOLIDATION_RUN], after_seq=seq, batch_size=RUN_BATCH,
                            conn=conn)


def _folding_run(partition: Partition, seq: int, conn: Connection) -> StoredEvent | None:
    """The first run after chain position `seq` whose range holds it; None once a run has
    passed it without holding it (it was not a result that pass could read) or when no
    run has read that far yet."""
    for run in _runs_after(partition, seq, conn):
        first, last = run.payload.get("first_seq", 0), run.payload.get("last_seq", 0)
        if first and first <= seq <= last:
            return run
        if last >= seq:
            return None
    return None


def _moved(run: StoredEvent, payload: dict[str, Any], stamp_ns: int, event_id: int
           ) -> list[tuple[str, str]]:
    """(kind, key) of the facts `run` touched that this result supports by the run's rules."""
    version = run.payload.get("rule_version", DEFAULT_RULE_VERSION)
    version = version if version in RULE_VERSIONS else DEFAULT_RULE_VERSION
    config = RulesConfig(rule_version=version)
    touched = set(run.payload.get("touched_facts", ()))
    moved = set()
    for rule in rules_for(version):
        for key in fact_keys_of_result(rule, payload, stamp_ns, event_id, config):
            if f"{rule.kind}|{key}" in touched:
                moved.add((rule.kind, key))
    return sorted(moved)


def _as_counted(partition: Partition, entry: dict[str, Any], payload: dict[str, Any],
                conn: Connection) -> dict[str, Any]:
    """The payload whose facts a result moved. An amendment is no attempt of its own: it
    moved its attempt's facts under its outcome once it was counted (applied, or applied
    and later superseded), nothing when it was held or refused; its disposition is noted
    in the entry (docs/consolidation.md#amendments)."""
    if not payload.get("amends"):
        return payload
    disposition = partition.disposition_of(entry["event_id"], conn)
    entry["amendment"] = disposition
    if disposition in (AMENDMENT_APPLIED, AMENDMENT_SUPERSEDED):
        return {name: value for name, value in payload.items() if name != "amends"}
    return payload


def _fact_now(fact) -> dict[str, Any]:
    return {"fact_id": fact.id, "kind": fact.kind, "key": fact.key, "status": fact.status,
            "confidence": fact.confidence, "n_observations": fact.n_observations,
            "rule_version": fact.rule_version}


def explain_intent(partition: Partition, intent_id: str) -> dict[str, Any]:
    """The lineage of one intent as plain data (see the module's docstring), from one
    snapshot of the store. Raises IntentNotFound (an InputError) when no live event of
    this identity carries it."""
    with partition.store.read() as conn:
        rows = partition.intent_event_rows(intent_id, conn, newest=MAX_LINEAGE_EVENTS)
        older = partition.intent_event_count(intent_id, conn) - len(rows) \
            if len(rows) == MAX_LINEAGE_EVENTS else 0
        found = compactions(partition.identity_hash, conn)
        compacted_until = max((c.until_seq for c in found), default=0)
        if not rows:
            where = (f" (history up to seq {compacted_until} was compacted and is not read)"
                     if compacted_until else "")
            raise IntentNotFound(f"no consultation or result of identity "
                                 f"{partition.identity_hash[:12]} carries intent "
                                 f"{intent_id!r}{where}")
        consultations, results, runs, moved_keys = [], [], {}, set()
        for event_id, seq, kind, stamp_ns, payload_json in rows:
            payload = json.loads(payload_json)
            if kind == FACT_CONSULTATION:
                consultations.append(_consultation(event_id, seq, stamp_ns, payload))
                continue
            if kind != EXECUTION_RESULT:
                continue
            entry = _result(event_id, seq, stamp_ns, payload)
            counted = _as_counted(partition, entry, payload, conn)
            run = _folding_run(partition, seq, conn)
            entry["folded_by_run"] = run.id if run is not None else None
            entry["moved_facts"] = []
            if run is not None:
                runs[run.id] = {"event_id": run.id, "seq": run.seq,
                                "rule_version": run.payload.get("rule_version"),
                                "first_seq": run.payload.get("first_seq"),
                                "last_seq": run.payload.get("last_seq")}
                moved = _moved(run, counted, stamp_ns, event_id)
                entry["moved_facts"] = [{"kind": kind_, "key": key} for kind_, key in moved]
                moved_keys.update(moved)
            results.append(entry)
        facts = partition.facts_by_key(moved_keys, conn) if moved_keys else []
    return {"intent_id": intent_id, "consultations": consultations, "results": results,
            "runs": [runs[run_id] for run_id in sorted(runs)],
            "facts": [_fact_now(f) for f in sorted(facts, key=lambda f: (f.kind, f.key))],
            "compacted_until_seq": compacted_until, "older_events_not_listed": older}


def format_lineage(lineage: dict[str, Any]) -> str:
    """`explain_intent`'s result as the text `robot-memory explain --intent` prints."""
    lines = [f"intent {lineage['intent_id']}"]
    if lineage.get("older_events_not_listed"):
        lines.append(f"  the newest {MAX_LINEAGE_EVENTS} of its events are listed; "
                     f"{lineage['older_events_not_listed']} older ones are not")
    consultations = lineage["consultations"]
    lines.append(f"  {len(consultations)} grounding consultation(s)")
    for c in consultations:
        query = c.get("query") or {}
        lines.append(f"    event {c['event_id']}: {c['requester']} asked "
                     f"{query.get('skill_id')} on {query.get('target_class') or '-'} in "
                     f"{query.get('environment') or '-'}: {c['status']}"
                     + (f" ({c['reason_code']})" if c.get("reason_code") else "")
                     + f", consultation {c['consultation_id']}")
        for f in c["facts"]:
            lines.append(f"      served {f['kind']} [{f['key']}] (fact {f['fact_id']}, "
                         f"rule {f['rule_version']})")
        if c.get("analogies"):
            lines.append(f"      {len(c['analogies'])} analogy(ies) lent for another target")
        if c.get("priors"):
            lines.append(f"      {len(c['priors'])} fleet prior(s) served beside")
    results = lineage["results"]
    lines.append(f"  {len(results)} execution result(s)")
    for r in results:
        outcome = "success" if r.get("success") else f"failure ({r.get('failure_reason') or '-'})"
        attempt = ""
        if r.get("attempt_id"):
            attempt += f", attempt {r['attempt_id']}"
        if r.get("amends"):
            attempt += f", amends {r['amends']}"
        lines.append(f"    event {r['event_id']} (seq {r['seq']}): {r.get('skill_id')} on "
                     f"{r.get('target_class') or '-'}: {outcome}{attempt}")
        if r["folded_by_run"] is None:
            lines.append("      not consolidated yet")
        else:
            moved = ", ".join(f"{m['kind']} [{m['key']}]" for m in r["moved_facts"]) or "none"
            lines.append(f"      folded by run {r['folded_by_run']}; moved: {moved}")
    for f in lineage["facts"]:
        lines.append(f"  now: {f['kind']} [{f['key']}] (fact {f['fact_id']}): {f['status']}, "
                     f"confidence {f['confidence']}, {f['n_observations']} observations, "
                     f"rule {f['rule_version']}")
    if lineage["compacted_until_seq"]:
        lines.append(f"  history up to seq {lineage['compacted_until_seq']} was compacted into "
                     "archive segments and is not listed")
    return "\n".join(lines)

"""Why does the robot think this? The provenance of one fact, from the log alone:
the supporting events (counts by outcome and parameter, and their ids), the passes
that touched the fact, its conflicts, and the grounding consultations that served it.

Events that compactions moved into archive segments are read from them when the segments
are given and all present; otherwise the explanation names the segments it did not read
and counts the live store's events only."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from robot_memory.retention.archives import archived_segments, history_events
from robot_memory.consolidation.partials import fact_keys_of_result
from robot_memory.consolidation.rules import (DEFAULT_RULE_VERSION, RULE_VERSIONS, RULES_BY_KIND,
                                              RulesConfig, rules_for)
from robot_memory.errors import InputError
from robot_memory.event_kinds import (CONSOLIDATION_RUN, EXECUTION_RESULT, FACT_CONSULTATION,
                                      KNOWLEDGE_CONFLICT, KNOWLEDGE_CONFLICT_RESOLVED)
from robot_memory.execution_result import InvalidRecord, record_from_payload
from robot_memory.store import AmendedAttempt, FactRow, Partition, StoredEvent

MAX_IDS = 200  # event ids listed in full; beyond that the count is still exact
SERVED_AS_FACT = "fact"
SERVED_AS_ANALOGY = "analogy"


class FactNotFound(InputError):
    """Raised when no fact of this identity has the given id or kind + key."""


def find_fact(partition: Partition, fact_id: int = 0, kind: str = "",
              key: str = "") -> FactRow:
    """The fact of this identity with `fact_id`, or else with `kind` and `key`.
    Raises FactNotFound (an InputError, exit code 3) when there is none."""
    for fact in partition.facts():
        if (fact_id and fact.id == fact_id) or \
                (not fact_id and (fact.kind, fact.key) == (kind, key)):
            return fact
    wanted = f"id {fact_id}" if fact_id else f"{kind} [{key}]"
    raise FactNotFound(f"no fact {wanted} for identity {partition.identity_hash[:12]}")


def _supporting(results: Iterable[StoredEvent], fact: FactRow,
                amended: dict[int, AmendedAttempt]) -> dict[str, Any]:
    """The results behind a fact: each is added up on its own by the fact's rule, through
    the methods a pass calls, and supports the fact if the rule would render its key. An
    amended attempt (`amended`, by its original's event id) is its original counted with
    the final outcome, listed with the amendment that gave it; an amendment supports
    nothing of its own (docs/consolidation.md#amendments)."""
    # The rules of the version that made the fact (an operator's: the default set's).
    # A kind no set has (a rule being tried out) is looked up among the default's.
    version = fact.rule_version if fact.rule_version in RULE_VERSIONS else DEFAULT_RULE_VERSION
    rules = RULES_BY_KIND if version == DEFAULT_RULE_VERSION else \
        {rule.kind: rule for rule in rules_for(version)}
    rule = rules[fact.kind] if fact.kind in rules else RULES_BY_KIND[fact.kind]
    config = RulesConfig(rule_version=version)
    outcomes = {"success": 0, "failure": 0}
    parameters: dict[str, dict[str, int]] = {}
    ids: list[int] = []
    amendments: list[dict[str, Any]] = []
    for event in results:
        payload = event.payload
        final = amended.get(event.id)
        if final is not None:  # counted with the amendment's outcome
            payload = {**payload, "success": final.success,
                       "failure_reason": final.failure_reason}
        try:
            record = record_from_payload(payload, event.stamp_ns)
        except InvalidRecord:
            continue
        if fact.key not in fact_keys_of_result(rule, payload, event.stamp_ns, event.id,
                                               config):
            continue
        if final is not None and len(amendments) < MAX_IDS:
            amendments.append({
                "event_id": event.id, "amended_by": final.amendment_event_id,
                "from": _outcome(event.payload), "to": _outcome(payload)})
        outcomes["success" if record.success else "failure"] += 1
        for name, value in record.parameters.items():
            bag = parameters.setdefault(name, {})
            bag[repr(float(value))] = bag.get(repr(float(value)), 0) + 1
        if len(ids) < MAX_IDS:
            ids.append(event.id)
    return {"count": sum(outcomes.values()), "outcomes": outcomes,
            "parameters": {n: dict(sorted(b.items(), key=lambda kv: float(kv[0])))
                           for n, b in sorted(parameters.items())},
            "event_ids": ids, "event_ids_truncated": sum(outcomes.values()) > len(ids),
            "amended": amendments}


def _outcome(payload: dict[str, Any]) -> str:
    """The outcome as explain words it: success, or failure and its reason."""
    if payload.get("success"):
        return "success"
    return f"failure ({payload.get('failure_reason') or 'unspecified'})"


def _served_as(payload: dict[str, Any], kind_key: tuple[str, str]) -> str | None:
    """How a consultation used the fact: as one of the robot's own (None if not at
    all), or as the source of an analogy for another target (a lent fact of the skill,
    or the property it was compared on)."""
    if any((f.get("kind"), f.get("key")) == kind_key for f in payload.get("facts", ())):
        return SERVED_AS_FACT
    for analogy in payload.get("analogies", ()):
        if any((f.get("kind"), f.get("key")) == kind_key
               for f in (*analogy.get("facts", ()), *analogy.get("properties", ()))):
            return SERVED_AS_ANALOGY
    return None


def _blended_with(payload: dict[str, Any], key: str) -> list[str]:
    """The identities whose facts of the same key were served beside this one as fleet
    priors (docs/priors.md), sorted."""
    return sorted({source["identity_hash"] for prior in payload.get("priors", ())
                   for source in prior.get("sources", ()) if source.get("key") == key})


def explain_fact(partition: Partition, fact: FactRow,
                 archive_dir: Path | None = None) -> dict[str, Any]:
    """Provenance of a fact as plain data: its value, rule version and confidence, the
    supporting events (by outcome and parameter, with ids), the consolidation runs that
    touched it, its conflicts and the consultations that served it (those that lent it
    as an analogy for another target marked `served_as: analogy`). Reads the log only;
    store errors propagate (SQLAlchemy errors; the CLI converts them)."""
    tag = f"{fact.kind}|{fact.key}"
    runs, conflicts, consultations = [], [], []
    archived = archived_segments(partition, archive_dir)
    read_archives = bool(archived) and all(a["present"] for a in archived)

    def log(kinds: list[str]) -> Iterable[StoredEvent]:
        return history_events(partition, archive_dir, kinds) if read_archives \
            else partition.events(kinds)
    for event in log([CONSOLIDATION_RUN, KNOWLEDGE_CONFLICT, KNOWLEDGE_CONFLICT_RESOLVED,
                      FACT_CONSULTATION]):
        payload = event.payload
        if event.kind == CONSOLIDATION_RUN and tag in payload.get("touched_facts", ()):
            runs.append({"event_id": event.id, "rule_version": payload["rule_version"],
                         "first_seq": payload["first_seq"], "last_seq": payload["last_seq"],
                         "events_read": payload["events_read"]})
        elif event.kind in (KNOWLEDGE_CONFLICT, KNOWLEDGE_CONFLICT_RESOLVED) and \
                (payload.get("fact_kind"), payload.get("fact_key")) == (fact.kind, fact.key):
            conflicts.append({"event_id": event.id, "event": event.kind,
                              "status": payload["status"], "test": payload.get("test")})
        elif event.kind == FACT_CONSULTATION:
            served_as = _served_as(payload, (fact.kind, fact.key))
            if served_as is None:
                continue
            entry = {"event_id": event.id, "consultation_id": payload.get("consultation_id"),
                     "requester": payload.get("requester"),
                     "intent_id": payload.get("intent_id")}
            if served_as == SERVED_AS_ANALOGY:  # lent for another target: say which
                entry.update(served_as=served_as,
                             for_target=payload.get("query", {}).get("target_class"))
            blended = _blended_with(payload, fact.key)
            if blended:  # served beside fleet priors of the same key: whose
                entry["blended_with_priors_of"] = blended
            consultations.append(entry)
    return {"fact": {"id": fact.id, "kind": fact.kind, "key": fact.key, "status": fact.status,
                     "confidence": fact.confidence, "n_observations": fact.n_observations,
                     "rule_version": fact.rule_version,
                     "last_supporting_event_id": fact.last_supporting_event_id,
                     "value": fact.value},
            "supporting_events": _supporting(log([EXECUTION_RESULT]), fact,
                                             partition.amended_attempts()), "runs": runs,
            "conflicts": conflicts, "consultations": consultations,
            "archived": archived, "archived_read": read_archives}


def format_explanation(explanation: dict[str, Any]) -> str:
    """`explain_fact`'s result as the text `robot-memory explain` prints."""
    fact, support = explanation["fact"], explanation["supporting_events"]
    lines = [f"{fact['kind']} [{fact['key']}] (fact {fact['id']})",
             f"  status {fact['status']}, confidence {fact['confidence']}, "
             f"{fact['n_observations']} observations, rule {fact['rule_version']}",
             *_regime_lines(fact.get("value")),
             f"  supported by {support['count']} execution results: "
             f"{support['outcomes']['success']} successes, {support['outcomes']['failure']} "
             "failures"]
    for name, bag in support["parameters"].items():
        lines.append(f"    {name}: " + ", ".join(f"{v} x{c}" for v, c in bag.items()))
    more = " ..." if support["event_ids_truncated"] else ""
    lines.append(f"    event ids: {', '.join(map(str, support['event_ids']))}{more}")
    for attempt in support.get("amended", ()):
        lines.append(f"    attempt event {attempt['event_id']} amended by event "
                     f"{attempt['amended_by']}: {attempt['from']} -> {attempt['to']}")
    lines.append(f"  touched by {len(explanation['runs'])} consolidation runs: " +
                 ", ".join(f"event {r['event_id']} (seq {r['first_seq']}..{r['last_seq']})"
                           for r in explanation["runs"]))
    for conflict in explanation["conflicts"]:
        lines.append(f"  {conflict['event']} (event {conflict['event_id']}): "
                     f"{conflict['status']['from']} -> {conflict['status']['to']}")
    consultations = explanation["consultations"]
    lent = sum(c.get("served_as") == SERVED_AS_ANALOGY for c in consultations)
    lines.append(f"  served in {len(consultations)} grounding consultations" +
                 (f" ({lent} as an analogy for another target)" if lent else "") +
                 "".join(f"\n    {c['requester']} for intent {c['intent_id'] or '-'} "
                         f"(consultation {c['consultation_id']})" + _lent_note(c)
                         for c in consultations))
    archived = explanation.get("archived", [])
    if archived:
        missing = [a["segment"] for a in archived if not a["present"]]
        where = f"seq {archived[0]['from_seq']}..{archived[-1]['until_seq']}"
        lines.append(f"  history {where} is in {len(archived)} archive segment(s): " +
                     ("read" if explanation.get("archived_read") else
                      "not read, counts above are the live store's only; needed: " +
                      ", ".join(missing or [a["segment"] for a in archived])))
    return "\n".join(lines)


def _evidence_text(evidence: dict[str, Any]) -> str:
    return "; ".join(f"{name} " + ", ".join(f"{row['band']}: {row['successes']} of {row['n']}"
                                            for row in rows)
                     for name, rows in sorted(evidence.items())) or "none"


def _regime_lines(value: Any) -> list[str]:
    """What a skill fact of rules v2.0 says of its regimes (docs/consolidation.md): the
    recommended band, the boundary and the test that set it, the regime before it, and a
    change still suspected. Nothing for a value without them."""
    if not isinstance(value, dict) or not isinstance(value.get("regime"), dict):
        return []
    lines = [f"  recommended {name} {band.get('median')}: {band.get('successes')} of "
             f"{band.get('n')} in this regime, rate {band.get('rate')}, "
             f"lower bound {band.get('lcb')}"
             for name, band in sorted((value.get("recommended_parameters") or {}).items())
             if isinstance(band, dict)]
    regime = value["regime"]
    if regime.get("since_ns") is None:
        lines.append("  one regime: no change found in its evidence")
    else:
        test = regime.get("test") or {}
        lines.append(f"  regime since event time {regime['since_ns']} ns, after "
                     f"{regime.get('changes')} change(s); set by {test.get('name')} band "
                     f"{test.get('band')}: " + ", ".join(
                         f"{k} {v}" for k, v in sorted(test.items())
                         if k not in ("name", "band")))
        previous = regime.get("previous") or {}
        lines.append(f"  regime before it (from {previous.get('since_ns')} to "
                     f"{previous.get('until_ns')} ns): "
                     + _evidence_text(previous.get("parameter_evidence") or {}))
    lines.append("  evidence in this regime: "
                 + _evidence_text({name: rows for name, rows in
                                   (value.get("parameter_evidence") or {}).items()}))
    suspected = value.get("change_suspected")
    if suspected:
        lines.append(f"  change suspected, not yet confirmed: {suspected.get('name')} band "
                     f"{suspected.get('band')} ({suspected.get('direction')}, statistic "
                     f"{suspected.get('statistic')} of {suspected.get('threshold')})")
    return lines


def _lent_note(consultation: dict[str, Any]) -> str:
    note = ""
    if consultation.get("served_as") == SERVED_AS_ANALOGY:
        note = f", as an analogy for {consultation.get('for_target')}"
    blended = consultation.get("blended_with_priors_of")
    if blended:
        note += f", beside fleet priors of {len(blended)} robot(s)"
    return note

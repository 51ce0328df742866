"""The text a model reads from each memory tool.

The first line of every answer is a verdict a model cannot miss: what kind of answer
this is (OK, ABSTAIN, ANALOGY, PRIOR, REFUSED, UNAVAILABLE, PREVIEW,
REPLAY, FACTS, EXPLAIN), the reason code in parentheses where there is one, and what
the model may or may not do with it. The rest is the evidence, one fact a line.

Inputs are plain values (dicts of a fact's fields, as ros/mcp_tools.py reads them from
the messages), so the wording is tested without ROS.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

# Statuses of a ground answer that are no answer from memory at all: the stack said
# nothing about the target (down, slow, refused).
UNAVAILABLE = "UNAVAILABLE"
TIMEOUT = "TIMEOUT"


def _number(value: float) -> str:
    return f"{value:g}"


def _band(band: Mapping[str, Any]) -> str:
    low, high = band.get("q1", band.get("median")), band.get("q3", band.get("median"))
    return f"{_number(low)}-{_number(high)}"


def value_summary(kind: str, value: Any) -> str:
    """What a planner needs of a fact's value, by kind (fact_schemas.py says what each
    holds); the whole value as JSON for a kind or a shape it does not know."""
    try:
        if kind == "skill_success_rate":
            common = value.get("most_common_failure")
            return (f"{value['successes']} of {value['n']} successes in this regime"
                    + (f", most common failure {common}" if common else ""))
        if kind == "interaction_pattern":
            bands = [f"{name} {_band(band)}"
                     for name, band in sorted((value.get("failure_parameters") or {}).items())]
            return (f"fails by {value['failure_reason']} in {value['share_of_failures']:.0%} "
                    "of failures" + (f" (at {', '.join(bands)})" if bands else ""))
        if kind == "object_property":
            return f"{value['property']} = {_number(value['band']['median'])} (median)"
        if kind == "zone_risk":
            return f"failure_rate = {value['failure_rate']:.2f} over {value['n']} attempts"
    except (KeyError, TypeError, AttributeError, ValueError):
        pass
    return "value=" + json.dumps(value, sort_keys=True, separators=(",", ":"))


def fact_line(fact: Mapping[str, Any]) -> str:
    """One fact as one line: kind [key] status, confidence, n, the skill's success rate and
    recommended parameters where it has them, what its value says, and its id (for
    explain_fact)."""
    parts = [f"{fact['kind']} [{fact['key']}] {fact.get('status', 'active')}",
             f"confidence={fact['confidence']:.2f}", f"n={fact['n_observations']}"]
    if fact.get("success_rate") is not None:
        parts.append(f"success_rate={fact['success_rate']:.2f}")
    parameters = fact.get("recommended_parameters") or {}
    if parameters:
        parts.append("recommended " + ", ".join(f"{name}={_number(value)}"
                                                for name, value in sorted(parameters.items())))
    if fact.get("value") is not None:
        parts.append(value_summary(fact["kind"], fact["value"]))
    if fact.get("fact_id"):
        parts.append(f"fact_id={fact['fact_id']}")
    return "- " + "; ".join(parts)


def _fact_lines(facts: Iterable[Mapping[str, Any]]) -> list[str]:
    return [fact_line(f) for f in facts]


def _subject(skill_id: str, target_class: str, environment: str) -> str:
    subject = skill_id + (f" on {target_class}" if target_class else " on any target")
    return subject + (f" in {environment}" if environment else "")


def unavailable(what: str, reason: str) -> str:
    """The stack could not be asked: nothing was read, from it or around it."""
    return (f"UNAVAILABLE: memory could not be asked ({what}): {reason}. Nothing was read "
            "from memory; treat this as no knowledge at all, not as a negative answer.")


def render_ground(answer: Mapping[str, Any], skill_id: str, target_class: str = "",
                  environment: str = "") -> str:
    """A `ground` answer (its fields by the GroundingQuery response's names, status as its
    name) as text whose first line says whether the robot knows, abstains, or lends."""
    status, code = answer["status"], answer.get("reason_code", "")
    subject = _subject(skill_id, target_class, environment)
    target = target_class or "the target"
    facts = list(answer.get("facts") or ())
    if status in (UNAVAILABLE, TIMEOUT):
        return unavailable("ground", f"{code}: {answer.get('reason', '')}")
    if status in ("IDENTITY_UNVERIFIED", "INVALID_REQUEST"):
        return (f"REFUSED ({code}): memory refused to answer about {subject}: "
                f"{answer.get('reason', '')}. Nothing was served; do not ground on memory.")
    if status == "OK":
        lines = [f"OK: memory holds facts of THIS robot about {subject}; ground on them "
                 "(confidence says how far)."]
    elif status == "ANALOGY":
        lines = [f"ANALOGY ({code}): memory has NO fact of this robot about {target}; these "
                 f"are facts of OTHER targets, lent by similarity. They are not knowledge of "
                 f"{target}: say so if you use them."]
    elif status == "PRIOR":
        lines = [f"PRIOR ({code}): this robot has NO servable fact about {subject}; these are "
                 "facts of OTHER robots of the same embodiment (the fleet's prior), not this "
                 "robot's experience: say so if you use them."]
    elif status == "ABSTAIN":
        lines = [f"ABSTAIN ({code}): memory has no fact it will serve about {subject}. Do not "
                 "act as if memory knew; plan without it or ask a human."]
    else:
        lines = [f"{status} ({code}): an answer this tool does not know how to read."]
    if answer.get("reason"):
        lines.append(f"reason: {answer['reason']}")
    if facts:
        heading = "facts of this robot:" if status == "OK" else \
            "context facts only (no fact of the skill):"
        lines += [heading, *_fact_lines(facts)]
    for analogy in answer.get("analogies") or ():
        compared = ", ".join(analogy.get("properties") or ()) or "no property"
        lines.append(f"analogy: {analogy['target_class']} (OTHER target), distance "
                     f"{analogy['distance']:.2f} on {compared}:")
        lines += _fact_lines(analogy.get("facts") or ())
    for prior in answer.get("priors") or ():
        lines.append(f"prior (OTHER robots): {prior['skill_id']} on {prior['target_class']} "
                     f"in {prior['environment']}: {prior['prior_successes']}/"
                     f"{prior['prior_n']} successes in the fleet, own "
                     f"{prior['own_successes']}/{prior['own_n']}, blended success rate "
                     f"{prior['blended_success_rate']:.2f}")
    trailer = [f"identity: {answer['identity_hash']}"] if answer.get("identity_hash") else []
    if answer.get("consultation_id"):
        trailer.append(f"consultation: {answer['consultation_id']} (audited)")
    if trailer:
        lines.append("; ".join(trailer))
    return "\n".join(lines)


def render_explain_fact(found: bool, reason: str, explanation_text: str) -> str:
    """An ExplainFact answer: the provenance of one fact, or why there is none."""
    if not found:
        return (f"NOT FOUND: memory cannot explain this fact: {reason}. It is no evidence "
                "either way.")
    return "EXPLAIN: the provenance of this fact of this robot.\n" + explanation_text


def render_explain_action(found: bool, reason: str, explanation_text: str,
                          intent_id: str) -> str:
    """The lineage of one planner intent: what memory told it, what the robot did, how it
    turned out."""
    if not found:
        return (f"NOT FOUND: memory has no lineage for intent {intent_id}: {reason}. It is no "
                "evidence that the action happened or not.")
    return f"EXPLAIN: the lineage of intent {intent_id}.\n" + explanation_text


def render_facts(identity_hash: str, run_event_id: int,
                 facts: Iterable[Mapping[str, Any]]) -> str:
    """The verified identity's facts, from the consolidator's snapshot."""
    facts = list(facts)
    head = (f"FACTS: {len(facts)} facts of THIS robot (identity {identity_hash}, as of "
            f"consolidation run {run_event_id}). Only active facts may be grounded on; "
            "candidate, contested and invalidated ones are listed for completeness.")
    return "\n".join([head, *_fact_lines(facts)]) if facts else \
        head + "\nmemory holds no facts yet."


def render_preview(success: bool, reason: str, diff: str, events_read: int,
                   facts_touched: int) -> str:
    """A dry-run pass: what consolidating now would change. Never applied by a tool."""
    if not success:
        return f"REFUSED: no preview: {reason}. Nothing was computed or applied."
    return (f"PREVIEW (dry run, NOTHING APPLIED): a consolidation pass now would read "
            f"{events_read} events and touch {facts_touched} facts. Show it to a human: "
            "only an operator can apply it (`robot-memory consolidate --apply`, or a "
            "signed request).\n" + diff)


def render_replay(snapshot: list[Mapping[str, Any]], identity_hash: str, until: str) -> str:
    """Facts as they were at a point of the log (replay: the live facts are not touched)."""
    head = (f"REPLAY: the facts of THIS robot (identity {identity_hash}) as they were "
            f"{until}, rebuilt from the log. They may differ from today's facts.")
    if not snapshot:
        return head + "\nno facts at that point."
    return "\n".join([head, *_fact_lines(snapshot)])


def refused(what: str, reason: str) -> str:
    """The stack is up and refused: unverified identity, inactive node, or a bad field."""
    return f"REFUSED: {what}: {reason}. Nothing was read around the refusal."

"""Verbs over the knowledge: `consolidate`, `replay`, `override`, `explain`, `facts`."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from robot_memory.canonical import canonical_json
from robot_memory.cli.common import (CommandError, archive_dir_from_args, partition_from_args,
                                     rules_config_from_args, segments_with_fleet, stamp_ns_of)
from robot_memory.errors import InputError


def cmd_consolidate(args) -> int:
    from robot_memory.consolidation import consolidation_pass
    from robot_memory.consolidation.diff import format_diff
    report = consolidation_pass(partition_from_args(args), rules_config_from_args(args),
                                apply=args.apply)
    print(format_diff(report))
    return 0


def _until_time(text: str, option: str) -> dict[str, int]:
    """TIME: event-time seconds (stamps, sim time under use_sim_time) or an ISO 8601 date."""
    from datetime import datetime, timezone
    try:
        return {"until_stamp_ns": stamp_ns_of(float(text))}
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise CommandError(f"{option} {text!r}: expected event-time seconds or an ISO time") \
            from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return {"until_stamp_ns": stamp_ns_of(repr(moment.timestamp()))}


def _until(args) -> dict[str, int]:
    """The replay bound: --until-event N, --until-time T, or the old --until (an integer
    is an event id, anything else a time), which says on stderr how it was read."""
    if args.until_event is not None:
        return {"until_event_id": args.until_event}
    if args.until_time is not None:
        return _until_time(args.until_time, "--until-time")
    text = args.until
    if text.isdigit():
        print(f"robot-memory replay: note: --until {text} read as an event id; --until is "
              f"deprecated, say --until-event {text} or --until-time {text}", file=sys.stderr)
        return {"until_event_id": int(text)}
    until = _until_time(text, "--until")
    print(f"robot-memory replay: note: --until {text} read as an event time; --until is "
          f"deprecated, say --until-time {text}", file=sys.stderr)
    return until


def cmd_replay(args) -> int:
    partition = partition_from_args(args)
    with segments_with_fleet(args, partition.store, [partition.identity_hash],
                             archive_dir_from_args(args), sys.stderr) as archive_dir:
        snapshot = _replay(args, partition, archive_dir)
    if args.out:
        Path(args.out).write_text(snapshot + "\n", encoding="utf-8")
        print(f"replayed facts written to {args.out}")
    else:
        print(snapshot)
    return 0


def _replay(args, partition, archive_dir: Path) -> str:
    from robot_memory.consolidation import replay_snapshot
    until = _until(args)
    until_seq = None
    if "until_event_id" in until:
        from robot_memory.retention.archives import archived_seq
        event = partition.event_by_id(until["until_event_id"])
        until_seq = event.seq if event is not None else \
            archived_seq(partition, archive_dir, until["until_event_id"])
        if until_seq is None:
            raise InputError("--until-event", "no_such_event",
                             f"no event {until['until_event_id']} in this identity's log")
    with _history_for_replay(archive_dir, partition, until_seq) as history:
        snapshot = replay_snapshot(history, rules_config_from_args(args), until_seq=until_seq,
                                   until_stamp_ns=until.get("until_stamp_ns"))
        _note_ill_shaped(history, until_seq)
    return snapshot


def _note_ill_shaped(partition, until_seq: int | None) -> None:
    """Name on stderr the operator facts the replay skipped (fact_schemas.py)."""
    from robot_memory.consolidation.checkpoint import ill_shaped_overrides
    for skipped in ill_shaped_overrides(partition):
        if until_seq is None or skipped.seq <= until_seq:
            print(f"robot-memory replay: note: ill-shaped operator fact skipped: "
                  f"{skipped.describe()}", file=sys.stderr)


@contextmanager
def _history_for_replay(archive_dir: Path, partition, until_seq):
    """The partition itself, or, once compactions moved history into segments, the whole
    history rebuilt from them in a scratch store (the live store is not touched)."""
    from robot_memory.retention.archives import whole_history
    from robot_memory.store import compactions
    with partition.store.read() as conn:
        compacted = bool(compactions(partition.identity_hash, conn))
    if not compacted:
        yield partition
        return
    with tempfile.TemporaryDirectory(prefix="robot_memory_replay_") as scratch:
        history = whole_history(partition, archive_dir,
                                f"sqlite:///{scratch}/h.db", until_seq)
        try:
            yield history
        finally:
            history.store.close()


def _find_fact(partition, text: str):
    """FACT argument: a fact id or KIND|KEY."""
    from robot_memory.grounding.explain import find_fact
    if text.isdigit():
        return find_fact(partition, fact_id=int(text))
    kind, sep, key = text.partition("|")
    if not sep:
        raise CommandError("FACT is a fact id or KIND|KEY, e.g. "
                           "'skill_success_rate|manipulation.grasp + glass_cup + sim'")
    return find_fact(partition, kind=kind, key=key)


def cmd_override(args) -> int:

    from robot_memory.consolidation import overrides as ov
    partition = partition_from_args(args)
    stamp = time.time_ns()  # when the operator acted (wall clock)
    # The privacy boundary first, before anything is written (an InputError: exit 3).
    ov.screen_override(partition, stamp, operator=args.operator, reason=args.reason,
                       kind=getattr(args, "kind", "") or "", key=getattr(args, "key", "") or "",
                       value=getattr(args, "value", None),
                       archive_path=str(getattr(args, "archive", "") or ""))
    if args.action == "fact":  # an OverrideError is an InputError (exit 3)
        try:
            value = json.loads(args.value)
        except json.JSONDecodeError as exc:
            raise CommandError(f"--value: not JSON: {exc}") from exc
        event = ov.record_operator_fact(partition, args.operator, args.reason, args.kind,
                                        args.key, value, args.confidence, stamp)
    elif args.action == "invalidate":
        event = ov.record_invalidation(partition, args.operator, args.reason,
                                       _find_fact(partition, args.fact), stamp)
    elif args.action in ("freeze", "unfreeze"):
        event = ov.record_freeze(partition, args.operator, args.reason,
                                 args.action == "freeze", stamp)
    else:
        event = ov.record_reset(partition, args.operator, args.reason, stamp,
                                Path(args.archive) if args.archive else None)
    details = {k: v for k, v in event.payload.items() if k not in ("operator", "reason")}
    print(f"override event {event.id} (seq {event.seq}) logged: {canonical_json(details)}")
    print("it takes effect at the next consolidation pass (the consolidator runs one as soon "
          "as it sees it; or run `robot-memory consolidate --apply`)")
    return 0


def cmd_explain(args) -> int:
    from robot_memory.grounding.explain import explain_fact, format_explanation
    if (args.fact is None) == (args.intent is None):
        raise CommandError("give either FACT or --intent ID")
    partition = partition_from_args(args)
    if args.intent is not None:
        from robot_memory.grounding.lineage import explain_intent, format_lineage
        lineage = explain_intent(partition, args.intent)
        print(canonical_json(lineage) if args.json else format_lineage(lineage))
        return 0
    fact = _find_fact(partition, args.fact)
    with segments_with_fleet(args, partition.store, [partition.identity_hash],
                             archive_dir_from_args(args), sys.stderr) as archive_dir:
        explanation = explain_fact(partition, fact, archive_dir)
    print(canonical_json(explanation) if args.json else format_explanation(explanation))
    return 0


def fact_json(fact) -> dict[str, Any]:
    return {"id": fact.id, "kind": fact.kind, "key": fact.key, "status": fact.status,
            "confidence": fact.confidence, "n_observations": fact.n_observations,
            "rule_version": fact.rule_version,
            "last_supporting_event_id": fact.last_supporting_event_id,
            "last_updated_ns": fact.last_updated_ns, "value": fact.value}


def cmd_facts(args) -> int:
    facts = partition_from_args(args).facts()
    if args.json:
        print(canonical_json([fact_json(f) for f in facts]))
        return 0
    if not facts:
        print("no facts")
    for fact in facts:
        print(f"{fact.kind} [{fact.key}] {fact.status} confidence={fact.confidence} "
              f"n={fact.n_observations} rule={fact.rule_version}")
    return 0

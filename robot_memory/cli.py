"""`robot-memory`: the command line. Each verb is a thin adapter over the core; a
failure prints one line saying what and where, and exits non-zero."""

from __future__ import annotations

import argparse
import json
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from robot_memory.canonical import canonical_json

DEFAULT_DB = "sqlite:///robot_memory.db"


class CommandError(Exception):
    """Raised by a verb for a failure the user can fix; printed without a traceback."""


def _identity(args) -> str:
    from robot_memory.manifest import load_manifest, parse_certified_hash
    if getattr(args, "identity", None):
        return parse_certified_hash(args.identity, "--identity")
    if getattr(args, "manifest", None):
        return load_manifest(args.manifest).identity_hash()
    raise CommandError("give --manifest PATH or --identity HASH")


def _partition(args):
    from robot_memory.store import MemoryStore
    return MemoryStore(args.db).partition(_identity(args))


def cmd_hash(args) -> int:
    from robot_memory.manifest import load_manifest
    print(load_manifest(args.manifest).identity_hash())
    return 0


def _stamp_ns(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("stamp must be a number of seconds")
    try:
        seconds = Decimal(str(value))
    except InvalidOperation as exc:
        raise ValueError(f"stamp {value!r} is not a number") from exc
    if not seconds.is_finite() or seconds < 0:
        raise ValueError(f"stamp {value!r} must be finite and >= 0")
    return int(seconds * 1_000_000_000)


def cmd_ingest(args) -> int:
    from robot_memory.event_kinds import EXECUTION_RESULT
    from robot_memory.records import InvalidRecord, validate_record
    from robot_memory.store import NewEvent
    partition = _partition(args)
    good, bad = [], 0
    with open(args.jsonl, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise ValueError("line is not a JSON object")
                data = dict(data)
                if "stamp" not in data:
                    raise ValueError("stamp: missing field (seconds)")
                data["stamp_ns"] = _stamp_ns(data.pop("stamp"))
                record = validate_record(data)
            except (ValueError, InvalidRecord) as exc:
                bad += 1
                print(f"{args.jsonl}:{number}: rejected: {exc}", file=sys.stderr)
                continue
            good.append(NewEvent(EXECUTION_RESULT, record.payload(), record.stamp_ns))
    for start in range(0, len(good), 5000):
        partition.append_many(good[start:start + 5000])
    print(f"ingested {len(good)} execution results, rejected {bad} lines "
          f"(identity {partition.identity_hash})")
    return 1 if bad else 0


def _rules_config(args):
    """The consolidator node's rules, with --param overrides (same names and checks)."""
    from robot_memory.consolidation import RulesConfig
    from robot_memory.parameters import node_settings
    try:
        return RulesConfig.from_settings(node_settings("consolidator",
                                                       _parse_overrides(args.param)))
    except ValueError as exc:
        raise CommandError(str(exc)) from exc


def cmd_consolidate(args) -> int:
    from robot_memory.consolidation import consolidation_pass
    from robot_memory.consolidation.diff import format_diff
    report = consolidation_pass(_partition(args), _rules_config(args), apply=args.apply)
    print(format_diff(report))
    return 0


def _until(text: str) -> dict[str, int]:
    """EVENT_ID (an integer) or TIME (seconds with a decimal point, or an ISO date)."""
    from datetime import datetime, timezone
    if text.isdigit():
        return {"until_event_id": int(text)}
    try:
        return {"until_stamp_ns": _stamp_ns(float(text))}
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise CommandError(f"--until {text!r}: expected an event id, seconds or an ISO time") \
            from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return {"until_stamp_ns": _stamp_ns(repr(moment.timestamp()))}


def cmd_replay(args) -> int:
    from robot_memory.consolidation import replay_snapshot
    partition = _partition(args)
    until = _until(args.until)
    until_seq = None
    if "until_event_id" in until:
        event = partition.event_by_id(until["until_event_id"])
        if event is None:
            raise CommandError(f"no event {until['until_event_id']} in this identity's log")
        until_seq = event.seq
    snapshot = replay_snapshot(partition, _rules_config(args), until_seq=until_seq,
                               until_stamp_ns=until.get("until_stamp_ns"))
    if args.out:
        Path(args.out).write_text(snapshot + "\n", encoding="utf-8")
        print(f"replayed facts written to {args.out}")
    else:
        print(snapshot)
    return 0


def _find_fact(partition, text: str):
    """FACT argument: a fact id or KIND|KEY."""
    from robot_memory.explain import FactNotFound, find_fact
    try:
        if text.isdigit():
            return find_fact(partition, fact_id=int(text))
        kind, sep, key = text.partition("|")
        if not sep:
            raise CommandError("FACT is a fact id or KIND|KEY, e.g. "
                               "'skill_success_rate|manipulation.grasp + glass_cup + sim'")
        return find_fact(partition, kind=kind, key=key)
    except FactNotFound as exc:
        raise CommandError(str(exc)) from exc


def cmd_override(args) -> int:
    import time

    from robot_memory.consolidation import overrides as ov
    partition = _partition(args)
    stamp = time.time_ns()  # when the operator acted (wall clock)
    try:
        if args.action == "fact":
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
    except ov.OverrideError as exc:
        raise CommandError(str(exc)) from exc
    details = {k: v for k, v in event.payload.items() if k not in ("operator", "reason")}
    print(f"override event {event.id} (seq {event.seq}) logged: {canonical_json(details)}")
    print("it takes effect at the next consolidation pass (the consolidator runs one as soon "
          "as it sees it; or run `robot-memory consolidate --apply`)")
    return 0


def cmd_explain(args) -> int:
    from robot_memory.explain import explain_fact, format_explanation
    partition = _partition(args)
    fact = _find_fact(partition, args.fact)
    explanation = explain_fact(partition, fact)
    print(canonical_json(explanation) if args.json else format_explanation(explanation))
    return 0


def fact_json(fact) -> dict[str, Any]:
    return {"id": fact.id, "kind": fact.kind, "key": fact.key, "status": fact.status,
            "confidence": fact.confidence, "n_observations": fact.n_observations,
            "rule_version": fact.rule_version,
            "last_supporting_event_id": fact.last_supporting_event_id,
            "last_updated_ns": fact.last_updated_ns, "value": fact.value}


def cmd_facts(args) -> int:
    facts = _partition(args).facts()
    if args.json:
        print(canonical_json([fact_json(f) for f in facts]))
        return 0
    if not facts:
        print("no facts")
    for fact in facts:
        print(f"{fact.kind} [{fact.key}] {fact.status} confidence={fact.confidence} "
              f"n={fact.n_observations} rule={fact.rule_version}")
    return 0


def cmd_verify(args) -> int:
    from robot_memory.store import check_store
    identity = _identity(args) if (args.manifest or args.identity) else None
    verdict = check_store(args.db, identity, full=args.full)
    for line in verdict.lines:
        print(line)
    print(("store verified" if verdict.ok else "STORE CORRUPTED") +
          (" (full check)" if args.full else " (boot check; --full re-hashes every event)"))
    return 0 if verdict.ok else 1


def cmd_migrate(args) -> int:
    from robot_memory.store import MemoryStore
    store = MemoryStore(args.db)  # opening migrates: verified before and after, logged
    print(store.migration.summary() if store.migration else
          "store schema is current: nothing to migrate")
    store.close()
    return 0


def _parse_overrides(pairs: list[str]) -> dict[str, Any]:
    import yaml
    overrides = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep:
            raise CommandError(f"--param {pair!r}: expected NAME=VALUE")
        overrides[name] = yaml.safe_load(text)
    return overrides


def cmd_bringup(args) -> int:
    from robot_memory.bringup import run_bringup
    overrides = _parse_overrides(args.param)
    overrides.update({"database_url": args.db, "manifest_path": str(Path(args.manifest).resolve()),
                      "certified_hash": args.certified_hash or "",
                      "certified_hash_file": args.certified_hash_file or ""})
    return run_bringup(overrides, args.use_sim_time, args.namespace, args.log_level)


def cmd_demo(args) -> int:
    from robot_memory.demo.run_demo import run_demo
    return run_demo(db_url=args.db, period_s=args.period, keep=args.keep)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="robot-memory", description=__doc__.split(".")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)

    def with_store(p, identity=True):
        p.add_argument("--db", default=DEFAULT_DB, help=f"SQLAlchemy URL (default {DEFAULT_DB})")
        if identity:
            group = p.add_mutually_exclusive_group()
            group.add_argument("--manifest", help="identity manifest YAML (identity = its hash)")
            group.add_argument("--identity", help="identity hash (64 hex digits)")
        return p

    def with_rule_params(p):
        p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                       help="a consolidator parameter, e.g. half_life_s=3600 (repeatable)")

    p = verbs.add_parser("hash", help="print a manifest's identity hash")
    p.add_argument("--manifest", required=True)
    p.set_defaults(func=cmd_hash)

    p = with_store(verbs.add_parser("ingest", help="append execution results from JSON lines"))
    p.add_argument("--jsonl", required=True)
    p.set_defaults(func=cmd_ingest)

    p = with_store(verbs.add_parser("consolidate", help="run a consolidation pass"))
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--dry-run", dest="apply", action="store_false",
                      help="print what a pass would change, write nothing")
    mode.add_argument("--apply", dest="apply", action="store_true", help="run the pass")
    with_rule_params(p)
    p.set_defaults(func=cmd_consolidate)

    p = with_store(verbs.add_parser("replay", help="facts as they were at a point of the log "
                                                   "(the live store is not touched)"))
    p.add_argument("--until", required=True, metavar="EVENT_ID|TIME",
                   help="an event id, or an event time (seconds or ISO 8601)")
    p.add_argument("--out", help="write the snapshot here instead of stdout")
    with_rule_params(p)
    p.set_defaults(func=cmd_replay)

    p = with_store(verbs.add_parser("explain", help="why does the robot think this?"))
    p.add_argument("fact", metavar="FACT", help="fact id, or KIND|KEY")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_explain)

    p = with_store(verbs.add_parser("facts", help="list an identity's facts"))
    p.add_argument("--json", action="store_true", help="stable, sorted JSON snapshot")
    p.set_defaults(func=cmd_facts)

    p = verbs.add_parser("override", help="a human correction, logged as an override event "
                                          "(replay reproduces it)")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    def override(name: str, help_text: str):
        q = with_store(actions.add_parser(name, help=help_text))
        q.add_argument("--operator", required=True, help="who takes responsibility")
        q.add_argument("--reason", required=True, help="why (kept in the log)")
        q.set_defaults(func=cmd_override)
        return q

    q = override("fact", "append an operator fact (served as active, marked operator/1)")
    q.add_argument("--kind", required=True)
    q.add_argument("--key", required=True)
    q.add_argument("--value", required=True, help="the fact value, a JSON object")
    q.add_argument("--confidence", type=float, default=1.0)
    q = override("invalidate", "mark a fact invalid: kept, never served")
    q.add_argument("fact", metavar="FACT", help="fact id, or KIND|KEY")
    override("freeze", "stop folding new results until unfreeze (overrides still apply)")
    override("unfreeze", "resume; the next pass catches up")
    q = override("reset", "archive the semantic tier to a file (hash logged) and start over")
    q.add_argument("--archive", help="archive file (default: next to the database)")

    p = with_store(verbs.add_parser("verify", help="check the store and hash chain(s); "
                                                   "non-zero with a diagnosis if broken"))
    p.add_argument("--full", action="store_true",
                   help="SQLite integrity_check and a re-hash of every event (default: the "
                        "verifier's fast boot check)")
    p.set_defaults(func=cmd_verify)

    p = with_store(verbs.add_parser("migrate", help="upgrade an older store's schema (also "
                                                    "done when a node opens it)"),
                   identity=False)
    p.set_defaults(func=cmd_migrate)

    p = verbs.add_parser("bringup", help="start the four nodes (what the launch file starts)")
    p.add_argument("--manifest", required=True)
    p.add_argument("--certified-hash", default="")
    p.add_argument("--certified-hash-file", default="")
    p.add_argument("--db", default=DEFAULT_DB)
    p.add_argument("--use-sim-time", action="store_true")
    p.add_argument("--namespace", default="")
    p.add_argument("--log-level", default="info")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="override a parameter of every node that declares it (repeatable)")
    p.set_defaults(func=cmd_bringup)

    p = verbs.add_parser("demo", help="the seed's glass_cup grasp example, end to end")
    p.add_argument("--db", default="", help="store URL (default: a temporary SQLite file)")
    p.add_argument("--period", type=float, default=2.0, help="consolidation period, sim seconds")
    p.add_argument("--keep", action="store_true", help="keep the temporary files")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    from robot_memory.manifest import ManifestError
    from robot_memory.store import StoreError
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (CommandError, ManifestError, StoreError, OSError) as exc:
        print(f"robot-memory {args.verb}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""`robot-memory`: the command line. Each verb is a thin adapter over the core; a
failure prints one line saying what and where, and exits with its family's code
(robot_memory.errors: the table is in `robot-memory --help`)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from contextlib import contextmanager
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from robot_memory.canonical import canonical_json
from robot_memory.errors import (EXIT_CODES, InputError, RobotMemoryError, StoreIntegrityError,
                                 UsageError, from_foreign)

DEFAULT_DB = "sqlite:///robot_memory.db"
# Set to 1 to get the traceback of an unexpected error instead of its one line.
TRACEBACK_ENV = "ROBOT_MEMORY_TRACEBACK"


class CommandError(UsageError):
    """Raised by a verb for arguments it refuses; printed without a traceback (exit 2)."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are a UsageError (one line, exit 2) instead of usage + exit."""

    def error(self, message: str):
        error = UsageError(f"{message} (see {self.prog} --help)")
        error.prog = self.prog  # the (sub)command whose arguments were refused
        raise error


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


MAX_STAMP_NS = 2**63 - 1


def _stamp_ns(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("stamp must be a number of seconds")
    try:
        seconds = Decimal(str(value))
    except InvalidOperation as exc:
        raise ValueError(f"stamp {value!r} is not a number") from exc
    if not seconds.is_finite() or seconds < 0:
        raise ValueError(f"stamp {value!r} must be finite and >= 0")
    stamp_ns = int(seconds * 1_000_000_000)
    if stamp_ns > MAX_STAMP_NS:
        raise ValueError(f"stamp {value!r} is past what a 64-bit nanosecond time can hold "
                         "(year 2262)")
    return stamp_ns


# No valid result comes near this as a JSON line; a longer line is skipped unread.
MAX_LINE_BYTES = 1 << 20


def _lines(handle):
    """The file's lines (bytes), None for each one longer than MAX_LINE_BYTES, whose
    bytes are skipped in chunks, never held whole."""
    while True:
        line = handle.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while (rest := handle.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
            yield None
            continue
        yield line


def cmd_ingest(args) -> int:
    from robot_memory.receipt import at_receipt, seconds_to_ns
    from robot_memory.records import InvalidRecord, validate_record
    from robot_memory.store import NewEvent
    from robot_memory.event_kinds import PRIVACY_REJECTION
    from robot_memory.ingest import PRIVACY_PREFIX
    max_ahead_ns, skewed, refusals = seconds_to_ns(args.max_clock_ahead_s), 0, []
    partition = _partition(args)
    good, bad = [], 0
    with open(args.jsonl, "rb") as handle:
        for number, line in enumerate(_lines(handle), start=1):
            if line is None:
                bad += 1
                print(f"{args.jsonl}:{number}: rejected: line: more than {MAX_LINE_BYTES} "
                      "bytes, not read (reason oversized)", file=sys.stderr)
                continue
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
            except RecursionError:
                bad += 1
                print(f"{args.jsonl}:{number}: rejected: nested too deeply to read",
                      file=sys.stderr)
                continue
            except (ValueError, InvalidRecord) as exc:  # UnicodeDecodeError included
                bad += 1
                print(f"{args.jsonl}:{number}: rejected: {exc}", file=sys.stderr)
                if isinstance(exc, InvalidRecord) and exc.reason.startswith(PRIVACY_PREFIX):
                    # As the logger and import-bag do: the refusal itself is history.
                    refusals.append(NewEvent(PRIVACY_REJECTION, {
                        "source": f"ingest {Path(args.jsonl).name}:{number}",
                        "field": exc.field, "category": exc.reason[len(PRIVACY_PREFIX):]},
                        time.time_ns()))
                continue
            event = NewEvent.of_record(record)
            stamp_ns, flagged = at_receipt(event.payload, event.stamp_ns, time.time_ns(),
                                           max_ahead_ns)
            if flagged:
                skewed += 1
                print(f"{args.jsonl}:{number}: stamp more than {args.max_clock_ahead_s} s "
                      "ahead of this machine's clock: stored at its receipt time "
                      "(clock_skew)", file=sys.stderr)
                event = event._replace(stamp_ns=stamp_ns)
            good.append(event)
    good += refusals
    for start in range(0, len(good), 5000):
        partition.append_many(good[start:start + 5000])
    print(f"ingested {len(good) - len(refusals)} execution results, rejected {bad} lines "
          f"(identity {partition.identity_hash})"
          + (f"; {skewed} stamped ahead, stored at receipt (clock_skew)" if skewed else ""))
    return 1 if bad else 0


def _rules_config(args, nodes: tuple[str, ...] = ("consolidator",)):
    """The consolidator node's rules, with --param overrides (same names and checks;
    `nodes` are the nodes whose parameter names the verb accepts)."""
    from robot_memory.consolidation import RulesConfig
    from robot_memory.parameters import node_settings
    try:
        return RulesConfig.from_settings(node_settings("consolidator",
                                                       _parse_overrides(args.param, nodes)))
    except ValueError as exc:
        raise CommandError(str(exc)) from exc


def cmd_consolidate(args) -> int:
    from robot_memory.consolidation import consolidation_pass
    from robot_memory.consolidation.diff import format_diff
    report = consolidation_pass(_partition(args), _rules_config(args), apply=args.apply)
    print(format_diff(report))
    return 0


def _until_time(text: str, option: str) -> dict[str, int]:
    """TIME: event-time seconds (stamps, sim time under use_sim_time) or an ISO 8601 date."""
    from datetime import datetime, timezone
    try:
        return {"until_stamp_ns": _stamp_ns(float(text))}
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise CommandError(f"{option} {text!r}: expected event-time seconds or an ISO time") \
            from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return {"until_stamp_ns": _stamp_ns(repr(moment.timestamp()))}


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
    from robot_memory.consolidation import replay_snapshot
    partition = _partition(args)
    until = _until(args)
    until_seq = None
    if "until_event_id" in until:
        from robot_memory.compaction import archived_seq
        event = partition.event_by_id(until["until_event_id"])
        until_seq = event.seq if event is not None else \
            archived_seq(partition, _archive_dir(args), until["until_event_id"])
        if until_seq is None:
            raise InputError("--until-event", "no_such_event",
                             f"no event {until['until_event_id']} in this identity's log")
    with _history_for_replay(args, partition, until_seq) as history:
        snapshot = replay_snapshot(history, _rules_config(args), until_seq=until_seq,
                                   until_stamp_ns=until.get("until_stamp_ns"))
    if args.out:
        Path(args.out).write_text(snapshot + "\n", encoding="utf-8")
        print(f"replayed facts written to {args.out}")
    else:
        print(snapshot)
    return 0


@contextmanager
def _history_for_replay(args, partition, until_seq):
    """The partition itself, or, once compactions moved history into segments, the whole
    history rebuilt from them in a scratch store (the live store is not touched)."""
    from robot_memory.compaction import whole_history
    from robot_memory.store import compactions
    with partition.store.read() as conn:
        compacted = bool(compactions(partition.identity_hash, conn))
    if not compacted:
        yield partition
        return
    with tempfile.TemporaryDirectory(prefix="robot_memory_replay_") as scratch:
        history = whole_history(partition, _archive_dir(args), f"sqlite:///{scratch}/h.db",
                                until_seq)
        try:
            yield history
        finally:
            history.store.close()


def _find_fact(partition, text: str):
    """FACT argument: a fact id or KIND|KEY."""
    from robot_memory.explain import find_fact
    if text.isdigit():
        return find_fact(partition, fact_id=int(text))
    kind, sep, key = text.partition("|")
    if not sep:
        raise CommandError("FACT is a fact id or KIND|KEY, e.g. "
                           "'skill_success_rate|manipulation.grasp + glass_cup + sim'")
    return find_fact(partition, kind=kind, key=key)


def cmd_override(args) -> int:
    import time

    from robot_memory.consolidation import overrides as ov
    partition = _partition(args)
    stamp = time.time_ns()  # when the operator acted (wall clock)
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
    if bool(args.witness) != bool(args.public_key):
        raise CommandError("--witness and --public-key go together")
    identity = _identity(args) if (args.manifest or args.identity) else None
    verdict = check_store(args.db, identity, full=args.full)
    if verdict.open_error is not None and not isinstance(verdict.open_error,
                                                         StoreIntegrityError):
        raise verdict.open_error  # locked, unreachable, bad URL: not a verdict on the data
    for line in verdict.lines:
        print(line)
    ok = verdict.ok
    if args.witness:
        ok = _verify_witness(args, identity) and ok
    if args.archives:
        ok = _verify_archives(args, identity) and ok
    print(("store verified" if ok else "STORE CORRUPTED") +
          (" (full check)" if args.full else " (boot check; --full re-hashes every event)"))
    return 0 if ok else 1


def _archive_dir(args) -> Path:
    from robot_memory.compaction import default_archive_dir
    return Path(args.archive_dir) if args.archive_dir else default_archive_dir(args.db)


def _verify_archives(args, identity: str | None) -> bool:
    """Every segment the compactions wrote re-hashes to what they recorded."""
    from robot_memory.compaction import verify_archives
    from robot_memory.store import MemoryStore
    store = MemoryStore(args.db)
    try:
        ok = True
        for ident in [identity] if identity else store.identities():
            report = verify_archives(store.partition(ident), Path(args.archives))
            print(report.describe())
            ok = ok and report.ok
    finally:
        store.close()
    return ok


def cmd_compact(args) -> int:
    from robot_memory.compaction import compact, seq_before
    partition = _partition(args)
    if args.before is not None:
        until = seq_before(partition, event_id=args.before)
    elif args.before_time is not None:
        until = seq_before(partition, stamp_ns=_time_ns(args.before_time, "--before-time"))
    else:
        until = partition.head()[0]
    report = compact(partition, until, _archive_dir(args))
    print(report.describe())
    return 0


def cmd_forget_segment(args) -> int:
    from robot_memory.compaction import forget_segment
    partition = _partition(args)
    c = forget_segment(partition, _archive_dir(args), args.segment, args.operator, args.reason)
    print(f"forgot segment {args.segment} (seq {c.from_seq}..{c.until_seq}); logged as a "
          "segment_forgotten event")
    return 0


def _verify_witness(args, identity: str | None) -> bool:
    """Does the chain still extend the newest checkpoint signed in the witness file?"""
    from robot_memory.store import MemoryStore
    from robot_memory.witness import load_public_key, verify_witness
    public_key = load_public_key(args.public_key)
    store = MemoryStore(args.db)
    try:
        if identity is None:
            identities = store.identities()
            if len(identities) != 1:
                raise CommandError(f"the store holds {len(identities)} identities: give "
                                   "--manifest or --identity to choose the witnessed one")
            identity = identities[0]
        verdict = verify_witness(store.partition(identity), args.witness, public_key)
    finally:
        store.close()
    print(f"witness {args.witness}: " + ("ok: " if verdict.ok else "FAILED: ") + verdict.message)
    return verdict.ok


def cmd_keygen(args) -> int:
    from robot_memory.witness import generate_key_pair, key_id, load_public_key
    private_path, public_path = generate_key_pair(args.out)
    print(f"private key {private_path} (mode 0600), public key {public_path} "
          f"(key id {key_id(load_public_key(public_path))})")
    return 0


def cmd_checkpoint(args) -> int:
    import time

    from robot_memory.witness import checkpoint_head, load_private_key
    key = load_private_key(args.key)
    partition = _partition(args)
    try:
        signed = checkpoint_head(partition, key, args.witness, time.time_ns())
    finally:
        partition.store.close()
    print(f"signed checkpoint seq {signed.checkpoint.seq} hash "
          f"{signed.checkpoint.event_hash} (key {signed.key_id}) appended to {args.witness}")
    return 0


def _password(args) -> str | None:
    if not args.password_file:
        return None
    return Path(args.password_file).read_text(encoding="utf-8").strip()


def cmd_db(args) -> int:
    from sqlalchemy.exc import DBAPIError

    from robot_memory.store import MemoryStore
    from robot_memory.store.roles import (RoleError, add_analyst_role, add_robot_role,
                                          init_security, security_statements)
    if args.action == "init" and args.print_sql:
        print(";\n".join(security_statements()) + ";")
        return 0
    store = MemoryStore(args.db)  # as the owner: creates the tables and triggers if missing
    try:
        with store.write() as conn:
            if args.action == "init":
                init_security(conn)
                done = "schema, triggers, roles, GRANTs and row-level security in place"
            elif args.action == "add-robot":
                identity = _identity(args)
                add_robot_role(conn, args.role, identity, _password(args))
                done = f"robot role {args.role} reads and writes identity {identity} only"
            else:
                add_analyst_role(conn, args.role, _password(args))
                done = f"analytics role {args.role} reads every robot's rows"
    except RoleError as exc:
        raise CommandError(str(exc)) from exc
    except DBAPIError as exc:
        raise CommandError(f"{args.db}: {str(exc.orig).strip().splitlines()[0]}") from exc
    finally:
        store.close()
    print(done)
    return 0


def cmd_migrate(args) -> int:
    from robot_memory.store import MemoryStore
    store = MemoryStore(args.db)  # opening migrates: verified before and after, logged
    print(store.migration.summary() if store.migration else
          "store schema is current: nothing to migrate")
    store.close()
    return 0


def _parse_overrides(pairs: list[str], nodes: tuple[str, ...]) -> dict[str, Any]:
    """--param NAME=VALUE pairs (VALUE read as YAML); a NAME none of `nodes` declares is
    refused (UnknownParameter), not ignored."""
    import yaml

    from robot_memory.parameters import check_names
    overrides = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep:
            raise CommandError(f"--param {pair!r}: expected NAME=VALUE")
        try:
            overrides[name] = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise CommandError(f"--param {pair!r}: VALUE is not YAML") from exc
    check_names(overrides, nodes)
    return overrides


def _check_url(url: str) -> None:
    """Refuse a URL SQLAlchemy cannot use before any node or process starts."""
    from sqlalchemy.engine import make_url
    try:
        make_url(url).get_dialect()
    except Exception as exc:  # ArgumentError, NoSuchModuleError, a missing driver
        raise from_foreign(exc, f"--db {url}") or exc


def cmd_bringup(args) -> int:
    from robot_memory.bringup import run_bringup
    from robot_memory.manifest import load_manifest, parse_certified_hash
    from robot_memory.parameters import node_names
    overrides = _parse_overrides(args.param, tuple(node_names()))
    _check_url(args.db)
    load_manifest(args.manifest)  # refuse an unreadable manifest before starting anything
    if args.certified_hash:
        parse_certified_hash(args.certified_hash, "--certified-hash")
    if args.certified_hash_file and not Path(args.certified_hash_file).is_file():
        raise InputError(args.certified_hash_file, "missing_file",
                         "no such file (--certified-hash-file)")
    overrides.update({"database_url": args.db, "manifest_path": str(Path(args.manifest).resolve()),
                      "certified_hash": args.certified_hash or "",
                      "certified_hash_file": args.certified_hash_file or ""})
    return run_bringup(overrides, args.use_sim_time, args.namespace, args.log_level,
                       one_process=args.one_process)


def cmd_demo(args) -> int:
    if args.sim:  # the closed loop in MuJoCo, with and without memory
        from robot_memory.sim.__main__ import main as sim_main
        return sim_main(["--out", args.out])
    from robot_memory.demo.run_demo import run_demo
    if args.db:
        _check_url(args.db)
    return run_demo(db_url=args.db, period_s=args.period, keep=args.keep)


def _time_ns(text: str, flag: str) -> int:
    """Seconds (event time) or an ISO 8601 time, as nanoseconds."""
    from datetime import datetime, timezone
    try:
        return _stamp_ns(float(text))
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise CommandError(f"{flag} {text!r}: expected seconds or an ISO time") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return _stamp_ns(repr(moment.timestamp()))


def cmd_import_bag(args) -> int:
    from robot_memory.bag_mapping import load_mapping
    from robot_memory.bags import import_bag
    partition = _partition(args)
    # A bag or mapping file that cannot be read raises an InputError (one line, exit 3).
    mapping = load_mapping(Path(args.map)) if args.map else None
    report = import_bag(
        partition, Path(args.path), topics=args.topic or None,
        since_ns=_time_ns(args.since, "--since") if args.since else None,
        until_ns=_time_ns(args.until, "--until") if args.until else None,
        mapping=mapping, progress=False if args.no_progress else None,
        on_rejection=lambda r: print(f"{args.path}: {r.describe()}", file=sys.stderr))
    for note in report.damage:
        print(f"{args.path}: could not read: {note}", file=sys.stderr)
    for topic, missing in sorted(report.unread.items()):
        print(f"{args.path}: could not read: {missing} of the messages the bag lists on "
              f"{topic}", file=sys.stderr)
    print(report.summary())
    return 0 if report.complete else 1


def cmd_export(args) -> int:
    from robot_memory.bundle import export_bundle
    report = export_bundle(_partition(args), Path(args.out), _rules_config(args),
                           Path(args.manifest) if args.manifest else None)
    print(f"bundle written to {report.out}: {report.events} events, {report.facts} facts, "
          f"chain head seq {report.chain_head[0]} {report.chain_head[1][:16]}; check it with "
          f"`robot-memory verify-bundle {report.out}`")
    return 0


def cmd_verify_bundle(args) -> int:
    from robot_memory.bundle import verify_bundle
    if not Path(args.dir).is_dir():
        raise InputError("DIR", "no_bundle", f"{args.dir}: not a directory")
    verdict = verify_bundle(Path(args.dir))
    for problem in verdict.problems:
        print(problem, file=sys.stderr)
    for note in verdict.notes:
        print(note)
    print("bundle verified" if verdict.ok else f"BUNDLE DOES NOT VERIFY: {verdict.problems[0]}")
    return 0 if verdict.ok else 1


def cmd_import_bundle(args) -> int:
    from robot_memory.bundle import import_bundle
    from robot_memory.store import MemoryStore
    partition, passes = import_bundle(Path(args.dir), MemoryStore(args.db))
    seq, head = partition.head()
    print(f"imported {seq} events (identity {partition.identity_hash}), re-ran {passes} "
          f"consolidation passes; chain head seq {seq} {head[:16]} as in the bundle")
    return 0


# The report reads the rules (consolidator) and the growth guard (episodic_logger).
REPORT_NODES = ("consolidator", "episodic_logger")


def cmd_report(args) -> int:
    from robot_memory.growth import GrowthGuard
    from robot_memory.parameters import node_settings
    from robot_memory.report import build_report
    try:
        logger = node_settings("episodic_logger", _parse_overrides(args.param, REPORT_NODES))
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    guard = GrowthGuard(logger["growth_limit_mb"], logger["hard_limit_mb"])
    page = build_report(_partition(args), _rules_config(args, REPORT_NODES), guard)
    Path(args.out).write_text(page, encoding="utf-8")
    print(f"report written to {args.out} ({len(page) // 1024} KiB, self-contained: open it "
          "in any browser, offline)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="robot-memory", description=__doc__.split(".")[0], epilog=_epilog(),
                    formatter_class=argparse.RawDescriptionHelpFormatter)
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
    p.add_argument("--max-clock-ahead-s", type=float, default=60.0, metavar="S",
                   help="a stamp more than S seconds ahead of this machine's clock is "
                        "stored at the time it is read, the stamp kept as sent_stamp_ns "
                        "(clock_skew; default 60)")
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
    until = p.add_mutually_exclusive_group(required=True)
    until.add_argument("--until-event", type=int, metavar="N",
                       help="the facts as they were after event id N (events.id)")
    until.add_argument("--until-time", metavar="T",
                       help="the facts as they were at event time T: seconds of event time "
                            "(stamps; sim time under use_sim_time) or an ISO 8601 date")
    until.add_argument("--until", metavar="EVENT_ID|TIME",
                       help="deprecated: an integer is an event id, anything else a time "
                            "(says on stderr which it took)")
    p.add_argument("--out", help="write the snapshot here instead of stdout")
    with_rule_params(p)
    p.add_argument("--archive-dir", metavar="DIR",
                   help="archive segments, for history that compactions moved there "
                        "(default: beside a SQLite database, DB.segments)")
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
    p.add_argument("--witness", metavar="FILE",
                   help="witness file of signed checkpoints: the chain must extend the newest")
    p.add_argument("--public-key", metavar="KEY",
                   help="public key the checkpoints are signed with")
    p.add_argument("--archives", metavar="DIR",
                   help="also re-hash the history compactions moved to the segments in DIR")
    p.set_defaults(func=cmd_verify)

    p = with_store(verbs.add_parser(
        "compact", help="move consolidated history into a sealed archive segment; the live "
                        "store keeps a compaction event naming it"))
    before = p.add_mutually_exclusive_group()
    before.add_argument("--before", type=int, metavar="EVENT_ID",
                        help="compact the events before this event id (default: all that "
                             "consolidation has folded)")
    before.add_argument("--before-time", metavar="T",
                        help="compact the events before event time T (seconds or ISO 8601)")
    p.add_argument("--archive-dir", metavar="DIR",
                   help="where segments go (default: beside a SQLite database, DB.segments)")
    p.set_defaults(func=cmd_compact)

    p = with_store(verbs.add_parser(
        "forget-segment", help="delete an archive segment on purpose, logged as an event "
                               "(verify --archives then skips it)"))
    p.add_argument("segment", metavar="NAME", help="the segment's file name")
    p.add_argument("--operator", required=True)
    p.add_argument("--reason", required=True)
    p.add_argument("--archive-dir", metavar="DIR")
    p.set_defaults(func=cmd_forget_segment)

    p = verbs.add_parser("keygen", help="create an Ed25519 key pair for signed checkpoints")
    p.add_argument("--out", required=True, metavar="PREFIX",
                   help="writes PREFIX (private, mode 0600) and PREFIX.pub")
    p.set_defaults(func=cmd_keygen)

    p = with_store(verbs.add_parser("checkpoint", help="sign the chain head and append it to "
                                                       "a witness file"))
    p.add_argument("--key", required=True, help="private key file (mode 0600)")
    p.add_argument("--witness", required=True, metavar="FILE", help="witness file (JSON lines)")
    p.set_defaults(func=cmd_checkpoint)

    p = verbs.add_parser("db", help="PostgreSQL fleet store: roles, GRANTs, row-level security")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = actions.add_parser("init", help="as the owner: schema, triggers, roles and policies")
    q.add_argument("--db", required=True, help="URL connecting as the owner role")
    q.add_argument("--print-sql", action="store_true",
                   help="print the GRANTs and policies instead of applying them")
    q = with_store(actions.add_parser("add-robot", help="a login role for one robot, mapped "
                                                         "to its identity"))
    q.add_argument("--role", required=True)
    q.add_argument("--password-file", help="file holding the role's password")
    q = actions.add_parser("add-analyst", help="a login role reading every robot's rows")
    q.add_argument("--db", required=True, help="URL connecting as the owner role")
    q.add_argument("--role", required=True)
    q.add_argument("--password-file", help="file holding the role's password")
    for q in actions.choices.values():
        q.set_defaults(func=cmd_db)

    p = with_store(verbs.add_parser("import-bag", help="import execution results from a "
                                                       "rosbag2 bag (MCAP or SQLite3)"))
    p.add_argument("path", metavar="PATH", help="bag directory, or a .mcap or .db3 file")
    p.add_argument("--topic", action="append", default=[], metavar="T",
                   help="import only this topic (repeatable; default: every topic of an "
                        "importable type)")
    p.add_argument("--since", metavar="TIME", help="only messages received at or after TIME "
                                                   "(bag receive time: seconds or ISO 8601)")
    p.add_argument("--until", metavar="TIME", help="only messages received before TIME")
    p.add_argument("--map", metavar="FILE", help="mapping file: other message types onto "
                                                 "ExecutionResult")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_import_bag)

    p = with_store(verbs.add_parser("export", help="write an evidence bundle: events, facts, "
                                                   "runs, consultations, SHA256SUMS"))
    p.add_argument("--out", required=True, metavar="DIR", help="a new or empty directory")
    with_rule_params(p)
    p.set_defaults(func=cmd_export)

    p = verbs.add_parser("verify-bundle", help="check a bundle offline: checksums, hash "
                                               "chain, facts rebuilt byte-equal")
    p.add_argument("dir", metavar="DIR")
    p.set_defaults(func=cmd_verify_bundle)

    p = with_store(verbs.add_parser("import-bundle", help="load a bundle into a fresh store "
                                                          "(same chain, same facts)"),
                   identity=False)
    p.add_argument("dir", metavar="DIR")
    p.set_defaults(func=cmd_import_bundle)

    p = with_store(verbs.add_parser("report", help="what the robot learned, as one "
                                                   "self-contained HTML file with plots"))
    p.add_argument("--out", required=True, metavar="FILE", help="e.g. report.html")
    with_rule_params(p)
    p.set_defaults(func=cmd_report)

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
    p.add_argument("--one-process", action="store_true",
                   help="run the four nodes in one process (robot_memory_all)")
    p.set_defaults(func=cmd_bringup)

    p = verbs.add_parser("demo", help="the glass_cup grasp example, end to end")
    p.add_argument("--db", default="", help="store URL (default: a temporary SQLite file)")
    p.add_argument("--period", type=float, default=2.0, help="consolidation period, sim seconds")
    p.add_argument("--keep", action="store_true", help="keep the temporary files")
    p.add_argument("--sim", action="store_true",
                   help="instead: the closed loop in a physics simulator (MuJoCo), the same "
                        "episodes with and without memory; writes a plot")
    p.add_argument("--out", default=".", help="with --sim: where the JSON and plot go")
    p.set_defaults(func=cmd_demo)
    return parser


def _epilog() -> str:
    import textwrap
    lines = ["exit codes:"]
    lines += [textwrap.fill(meaning, 88, initial_indent=f"  {code}  ", subsequent_indent="     ")
              for code, meaning in sorted(EXIT_CODES.items())]
    lines += [textwrap.fill("Errors print one line, PROGRAM VERB: error: WHAT: WHY "
                            f"({TRACEBACK_ENV}=1 shows the traceback of an unexpected one).",
                            88)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run one verb; every failure is one line on stderr and its family's exit code."""
    import os
    prog, db = "robot-memory", ""
    try:
        args = build_parser().parse_args(argv)
        prog, db = f"robot-memory {args.verb}", getattr(args, "db", "")
        return args.func(args)
    except RobotMemoryError as exc:
        error = exc
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # foreign errors become ours at this boundary
        if os.environ.get(TRACEBACK_ENV) == "1":
            raise
        error = from_foreign(exc, f"--db {db}" if db else "")
        if error is None:
            print(f"{prog}: internal error: {type(exc).__name__}: "
                  f"{str(exc).splitlines()[0] if str(exc) else ''} "
                  f"(set {TRACEBACK_ENV}=1 for the traceback)", file=sys.stderr)
            return 1
    where = getattr(error, "prog", "")
    one_line = " | ".join(line.strip() for line in str(error).splitlines() if line.strip())
    print(f"{where or prog}: error: {one_line}", file=sys.stderr)
    return error.exit_code


if __name__ == "__main__":
    sys.exit(main())

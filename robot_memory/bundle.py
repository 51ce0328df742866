"""Evidence bundles: one identity's memory as plain files a reviewer can check offline.

    bundle.json          format, identity hash, chain head, rule version and parameters,
                         the log position the facts reflect, file counts (one key a line)
    events.jsonl         every event in chain order: seq, kind, stamp_ns, payload,
                         prev_hash, event_hash (canonical JSON, one a line)
    runs.jsonl           the consolidation_run events (the same lines as in events.jsonl)
    consultations.jsonl  the fact_consultation events (likewise)
    facts.jsonl          the facts snapshot, one fact a line (`[` + lines joined by `,` +
                         `]` is the canonical snapshot, byte for byte)
    manifest.yaml        the identity manifest, when the export was given one
    SHA256SUMS           `sha256sum -c` format, every other file

`verify_bundle` re-checks all of it without the store: the checksums, each line's
canonical form, the hash chain, the derived files, and the facts rebuilt from the events
(byte-equal). A problem names the file and the line. `import_bundle` loads a bundle into
a fresh store and re-runs the consolidation passes where the log says they ran, so the
store ends with the same chain head and byte-equal facts.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from robot_memory.canonical import canonical_json
from robot_memory.consolidation import (
    RULE_VERSION,
    RulesConfig,
    consolidation_pass,
    replay_snapshot,
)
from robot_memory.consolidation.consolidation_pass import snapshot_entry
from robot_memory.event_kinds import (
    CONSOLIDATION_RUN,
    FACT_CONSULTATION,
    KNOWLEDGE_CONFLICT,
    KNOWLEDGE_CONFLICT_RESOLVED,
)
from robot_memory.store import MemoryStore, NewEvent, Partition
from robot_memory.store.episodic import event_digest
from robot_memory.store.schema import GENESIS_HASH

FORMAT = "robot_memory bundle 1"
EVENTS, RUNS, CONSULTATIONS, FACTS = ("events.jsonl", "runs.jsonl", "consultations.jsonl",
                                      "facts.jsonl")
INFO, MANIFEST, SUMS = "bundle.json", "manifest.yaml", "SHA256SUMS"
EVENT_KEYS = ("event_hash", "kind", "payload", "prev_hash", "seq", "stamp_ns")
INFO_KEYS = ("format", "identity_hash", "chain_head", "rule_version", "rules_config",
             "facts_until_seq", "counts", "manifest")
# Written by consolidation passes: a re-import regenerates them instead of copying.
PASS_KINDS = (CONSOLIDATION_RUN, KNOWLEDGE_CONFLICT, KNOWLEDGE_CONFLICT_RESOLVED)


class BundleError(Exception):
    """Raised when a bundle cannot be written (the target is not empty, the stored facts
    do not rebuild with the given rule parameters) or re-imported (the store already
    holds this identity, a pass does not regenerate identically)."""


# -- shared forms -------------------------------------------------------------------------
def event_line(seq: int, kind: str, stamp_ns: int, payload: Any, prev_hash: str,
               event_hash: str) -> str:
    return canonical_json({"seq": seq, "kind": kind, "stamp_ns": stamp_ns, "payload": payload,
                           "prev_hash": prev_hash, "event_hash": event_hash})


def info_text(info: dict[str, Any]) -> str:
    """bundle.json: one key a line, so a problem can name its line."""
    lines = [f"{json.dumps(key)}: {canonical_json(info[key])}" for key in INFO_KEYS]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def facts_lines(snapshot: str) -> list[str]:
    return [canonical_json(entry) for entry in json.loads(snapshot)]


def rules_config_json(config: RulesConfig) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()}


def facts_until_seq(run_payload: dict[str, Any] | None) -> int:
    """The log position the stored facts reflect: what the newest pass had read."""
    if run_payload is None:
        return 0
    return int(run_payload.get("override_seq", run_payload["last_seq"]))


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_sums(out: Path) -> None:
    names = sorted(p.name for p in out.iterdir() if p.is_file() and p.name != SUMS)
    (out / SUMS).write_text("".join(f"{_sha256_file(out / n)}  {n}\n" for n in names),
                            encoding="utf-8")


# -- export -------------------------------------------------------------------------------
@dataclass
class ExportReport:
    out: Path
    events: int
    facts: int
    chain_head: tuple[int, str]


def export_bundle(partition: Partition, out: Path, config: RulesConfig = RulesConfig(),
                  manifest_path: Path | None = None) -> ExportReport:
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise BundleError(f"{out}: not empty; export writes into a new or empty directory")
    out.mkdir(parents=True, exist_ok=True)
    counts = {"events": 0, "runs": 0, "consultations": 0}
    last_run = None
    with partition.store.read() as conn, \
            open(out / EVENTS, "w", encoding="utf-8") as events, \
            open(out / RUNS, "w", encoding="utf-8") as runs, \
            open(out / CONSULTATIONS, "w", encoding="utf-8") as consultations:
        head = partition.head(conn)
        for event in partition.events(until_seq=head[0], conn=conn):
            line = event_line(event.seq, event.kind, event.stamp_ns, event.payload,
                              event.prev_hash, event.event_hash) + "\n"
            events.write(line)
            counts["events"] += 1
            if event.kind == CONSOLIDATION_RUN:
                runs.write(line)
                counts["runs"] += 1
                last_run = event.payload
            elif event.kind == FACT_CONSULTATION:
                consultations.write(line)
                counts["consultations"] += 1
        stored = [canonical_json(snapshot_entry(f.kind, f.key, f.status, f.confidence,
                                                f.n_observations, f.rule_version,
                                                f.last_updated_ns, f.value))
                  for f in partition.facts(conn)]
    until = facts_until_seq(last_run)
    rebuilt = facts_lines(replay_snapshot(partition, config, until_seq=until))
    if rebuilt != stored:
        shutil.rmtree(out)
        raise BundleError("the stored facts differ from the facts rebuilt from the log with "
                          f"these rule parameters ({_first_fact_difference(stored, rebuilt)}); "
                          "give the consolidator's parameters with --param NAME=VALUE")
    (out / FACTS).write_text("".join(line + "\n" for line in stored), encoding="utf-8")
    if manifest_path is not None:
        shutil.copyfile(manifest_path, out / MANIFEST)
    counts["facts"] = len(stored)
    info = {"format": FORMAT, "identity_hash": partition.identity_hash,
            "chain_head": {"seq": head[0], "event_hash": head[1]},
            "rule_version": RULE_VERSION, "rules_config": rules_config_json(config),
            "facts_until_seq": until, "counts": counts,
            "manifest": MANIFEST if manifest_path is not None else None}
    (out / INFO).write_text(info_text(info), encoding="utf-8")
    write_sums(out)
    return ExportReport(out, counts["events"], len(stored), head)


def _first_fact_difference(have: list[str], want: list[str], have_name: str = "stored",
                           want_name: str = "rebuilt") -> str:
    for number, (a, b) in enumerate(zip(have, want, strict=False), start=1):
        if a != b:
            return f"fact {number}: {_entry_difference(a, b, have_name, want_name)}"
    return f"{len(have)} {have_name} facts, {len(want)} {want_name}"


def _entry_difference(a: str, b: str, a_name: str, b_name: str) -> str:
    try:
        left, right = json.loads(a), json.loads(b)
    except ValueError:
        return "not JSON"
    where = f"{right.get('kind')}|{right.get('key')}"
    for name in sorted(set(left) | set(right)):
        if left.get(name) != right.get(name):
            if isinstance(left.get(name), dict) and isinstance(right.get(name), dict):
                inner = sorted(k for k in set(left[name]) | set(right[name])
                               if left[name].get(k) != right[name].get(k))
                if inner:
                    sub = inner[0]
                    return (f"{where}: {name}.{sub}: {a_name} {left[name].get(sub)!r}, "
                            f"{b_name} {right[name].get(sub)!r}")
            return f"{where}: {name}: {a_name} {left.get(name)!r}, {b_name} {right.get(name)!r}"
    return f"{where}: same values, different bytes (not canonical JSON)"


# -- verify -------------------------------------------------------------------------------
@dataclass
class BundleVerdict:
    ok: bool
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class _Problems:
    """Problems found, by file; a line-level one outranks a bare checksum mismatch."""

    def __init__(self):
        self.by_file: dict[str, list[str]] = {}

    def add(self, file: str, line: int | None, text: str) -> None:
        where = f"{file}:{line}" if line is not None else file
        self.by_file.setdefault(file, []).append(f"{where}: {text}")

    def has(self, file: str) -> bool:
        return bool(self.by_file.get(file))


def _read_lines(path: Path, problems: _Problems) -> list[str] | None:
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        problems.add(path.name, None, "missing")
        return None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[:exc.start].count(b"\n") + 1
        problems.add(path.name, line, f"not UTF-8 ({exc.reason})")
        return None
    if text and not text.endswith("\n"):
        problems.add(path.name, text.count("\n") + 1, "last line has no newline (cut file?)")
    return text.split("\n")[:-1] if text else []  # byte-exact: a stray \r stays visible


def _check_sums(root: Path, problems: _Problems) -> tuple[set[str], dict[str, int]]:
    """Files whose SHA-256 differs from SHA256SUMS, and each file's line there."""
    mismatched, line_of = set(), {}
    lines = _read_lines(root / SUMS, problems)
    if lines is None:
        return mismatched, line_of
    for number, line in enumerate(lines, start=1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64 or "/" in name or not name:
            problems.add(SUMS, number, "not a `SHA256  FILE` line")
            continue
        line_of[name] = number
        if not (root / name).is_file():
            problems.add(SUMS, number, f"lists {name!r}, which is not in the bundle")
        elif _sha256_file(root / name) != digest:
            mismatched.add(name)
    for path in sorted(root.iterdir()):
        if path.name != SUMS and path.name not in line_of:
            problems.add(path.name, None, f"not listed in {SUMS} (added after export?)")
    return mismatched, line_of


def _parse_events(root: Path, identity: str, problems: _Problems) -> list[dict] | None:
    lines = _read_lines(root / EVENTS, problems)
    if lines is None:
        return None
    events, prev = [], GENESIS_HASH
    for number, line in enumerate(lines, start=1):
        try:
            event = json.loads(line)
        except ValueError as exc:
            problems.add(EVENTS, number, f"not JSON ({exc.msg} at column {exc.colno})")
            return None
        if not isinstance(event, dict) or tuple(sorted(event)) != EVENT_KEYS:
            problems.add(EVENTS, number, f"expected the keys {list(EVENT_KEYS)}")
            return None
        if canonical_json(event) != line:
            problems.add(EVENTS, number, "not in canonical form (edited: spacing, key order "
                                         "or number format)")
            return None
        if event["seq"] != number:
            problems.add(EVENTS, number, f"seq {event['seq']} where {number} is due "
                                         "(event removed, inserted or reordered)")
            return None
        if event["prev_hash"] != prev:
            problems.add(EVENTS, number, "prev_hash does not match the previous event's hash "
                                         "(event removed, inserted or reordered)")
            return None
        digest = event_digest(prev, identity, event["seq"], event["kind"], event["stamp_ns"],
                              canonical_json(event["payload"]))
        if digest != event["event_hash"]:
            problems.add(EVENTS, number, f"event_hash does not match its content (edited "
                                         f"{event['kind']} event, seq {event['seq']})")
            return None
        events.append(event)
        prev = digest
    return events


def _compare_lines(name: str, have: list[str] | None, want: list[str],
                   problems: _Problems, what: str) -> None:
    if have is None:
        return
    for number, (a, b) in enumerate(zip(have, want, strict=False), start=1):
        if a != b:
            problems.add(name, number, f"differs from {what}")
            return
    if len(have) != len(want):
        problems.add(name, min(len(have), len(want)) + 1,
                     f"{len(have)} lines where {what} has {len(want)}")


def _rebuilt_facts(events: list[dict], identity: str, config: RulesConfig, until: int
                   ) -> tuple[list[str], tuple[int, str]]:
    """The facts rebuilt from the events alone, in a throwaway SQLite store."""
    folder = tempfile.mkdtemp(prefix="robot_memory_verify_")
    try:
        store = MemoryStore(f"sqlite:///{folder}/rebuild.db", synchronous="OFF")
        partition = store.partition(identity)
        for start in range(0, len(events), 5000):
            partition.append_many([NewEvent(e["kind"], e["payload"], e["stamp_ns"])
                                   for e in events[start:start + 5000]])
        head = partition.head()
        snapshot = replay_snapshot(partition, config, until_seq=until)
        store.close()
        return facts_lines(snapshot), head
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _load_info(root: Path, problems: _Problems) -> tuple[dict | None, list[str] | None]:
    lines = _read_lines(root / INFO, problems)
    if lines is None:
        return None, None
    try:
        info = json.loads("\n".join(lines))
    except ValueError as exc:
        problems.add(INFO, exc.lineno, f"not JSON ({exc.msg})")
        return None, lines
    if not isinstance(info, dict) or tuple(info) != INFO_KEYS:
        bad = next((n for n, key in enumerate(INFO_KEYS, start=2)
                    if n > len(lines) or not lines[n - 1].startswith(json.dumps(key) + ": ")),
                   None)
        problems.add(INFO, bad, f"expected the keys {list(INFO_KEYS)}, one a line, in order")
        return None, lines
    if info["format"] != FORMAT:
        problems.add(INFO, 2, f"format {info['format']!r}, this robot_memory reads {FORMAT!r}")
        return None, lines
    return info, lines


def verify_bundle(root: Path) -> BundleVerdict:
    root = Path(root)
    if not root.is_dir():
        return BundleVerdict(False, [f"{root}: not a directory"])
    problems = _Problems()
    mismatched, sums_line = _check_sums(root, problems)
    info, info_lines = _load_info(root, problems)
    notes: list[str] = []
    derived_checked = False
    if info is not None:
        identity = str(info["identity_hash"])
        events = _parse_events(root, identity, problems)
        if events is None and EVENTS not in mismatched and INFO in mismatched:
            # The log is as exported, so the identity it is hashed with is what changed.
            problems.by_file.pop(EVENTS, None)
            problems.add(INFO, INFO_KEYS.index("identity_hash") + 2,
                         "identity_hash edited: the exported events do not hash with it")
        if events is not None:
            _check_derived(root, info, info_lines, events, problems)
            derived_checked = True
            config = _config_from_info(info, info_lines, problems)
            if config is not None and not problems.has(FACTS):
                rebuilt, head = _rebuilt_facts(events, identity, config,
                                               int(info["facts_until_seq"]))
                have = _read_lines(root / FACTS, problems)
                if have is not None and have != rebuilt:
                    detail = _first_fact_difference(have, rebuilt, "bundle", "rebuilt")
                    pairs = enumerate(zip(have, rebuilt, strict=False), start=1)
                    line = next((n for n, (a, b) in pairs if a != b),
                                min(len(have), len(rebuilt)) + 1)
                    if INFO in mismatched and not problems.has(INFO):
                        problems.add(INFO, INFO_KEYS.index("rules_config") + 2,
                                     f"rules_config edited: the facts rebuilt with it differ "
                                     f"from {FACTS} ({detail})")
                    else:
                        problems.add(FACTS, line, f"differs from the facts rebuilt from the "
                                                  f"events: {detail}")
                elif have is not None:
                    notes.append(f"facts rebuilt from {len(events)} events: {len(rebuilt)} "
                                 "facts, byte-equal")
                if head != (info["chain_head"]["seq"], info["chain_head"]["event_hash"]):
                    problems.add(INFO, 4, "the events re-hashed by a store give another head")
        if (root / MANIFEST).exists() or info["manifest"]:
            _check_manifest(root, identity, problems)
    if INFO in mismatched and derived_checked and not problems.has(INFO):
        # Every other line of bundle.json was rebuilt and compared: only this one can differ.
        problems.add(INFO, INFO_KEYS.index("rules_config") + 2,
                     f"rules_config edited after export (SHA-256 differs from {SUMS} line "
                     f"{sums_line[INFO]})")
    for name in sorted(mismatched):
        if not problems.has(name):
            problems.add(name, None, f"SHA-256 differs from {SUMS} line {sums_line[name]} "
                                     "(edited after export)")
    # A file whose checksum no longer matches is where the edit is: name it first.
    ordered = [text for name in sorted(problems.by_file,
                                       key=lambda n: (n != SUMS, n not in mismatched,
                                                      _report_order(n)))
               for text in problems.by_file[name]]
    if not ordered:
        notes.insert(0, f"checksums of {len(sums_line)} files match; hash chain of "
                        f"{info['counts']['events']} events intact, head seq "
                        f"{info['chain_head']['seq']} {info['chain_head']['event_hash'][:16]}")
    return BundleVerdict(not ordered, ordered, notes)


def _report_order(name: str) -> tuple[int, str]:
    order = [EVENTS, INFO, RUNS, CONSULTATIONS, FACTS, MANIFEST, SUMS]
    return (order.index(name) if name in order else len(order), name)


def _config_from_info(info: dict, info_lines: list[str], problems: _Problems
                      ) -> RulesConfig | None:
    line = INFO_KEYS.index("rules_config") + 2
    if info["rule_version"] != RULE_VERSION:
        problems.add(INFO, INFO_KEYS.index("rule_version") + 2,
                     f"rules {info['rule_version']!r}; this robot_memory rebuilds with "
                     f"{RULE_VERSION!r} (verify with that version)")
        return None
    try:
        config = RulesConfig.from_settings(info["rules_config"])
    except (TypeError, ValueError, AttributeError) as exc:
        problems.add(INFO, line, f"rules_config unusable: {exc}")
        return None
    if rules_config_json(config) != info["rules_config"]:
        problems.add(INFO, line, "rules_config has unknown or missing parameters")
        return None
    return config


def _check_derived(root: Path, info: dict, info_lines: list[str] | None, events: list[dict],
                   problems: _Problems) -> None:
    lines = [event_line(**e) for e in events]
    runs = [line for line, e in zip(lines, events, strict=True)
            if e["kind"] == CONSOLIDATION_RUN]
    consultations = [line for line, e in zip(lines, events, strict=True)
                     if e["kind"] == FACT_CONSULTATION]
    _compare_lines(RUNS, _read_lines(root / RUNS, problems), runs, problems,
                   f"the consolidation_run events of {EVENTS}")
    _compare_lines(CONSULTATIONS, _read_lines(root / CONSULTATIONS, problems), consultations,
                   problems, f"the fact_consultation events of {EVENTS}")
    last_run = next((e["payload"] for e in reversed(events)
                     if e["kind"] == CONSOLIDATION_RUN), None)
    head = events[-1] if events else {"seq": 0, "event_hash": GENESIS_HASH}
    facts = _read_lines(root / FACTS, problems)
    expected = {**info, "format": FORMAT,
                "chain_head": {"seq": head["seq"], "event_hash": head["event_hash"]},
                "facts_until_seq": facts_until_seq(last_run),
                "counts": {"events": len(events), "runs": len(runs),
                           "consultations": len(consultations),
                           "facts": len(facts) if facts is not None else info["counts"]},
                "manifest": MANIFEST if (root / MANIFEST).exists() else None}
    _compare_lines(INFO, info_lines, info_text(expected).splitlines(), problems,
                   f"what {EVENTS} and the other files say")


def _check_manifest(root: Path, identity: str, problems: _Problems) -> None:
    from robot_memory.manifest import ManifestError, load_manifest
    try:
        computed = load_manifest(root / MANIFEST).identity_hash()
    except (ManifestError, OSError) as exc:
        problems.add(MANIFEST, None, f"unreadable: {exc}")
        return
    if computed != identity:
        problems.add(MANIFEST, None, f"hashes to {computed[:16]}..., the bundle's identity "
                                     f"is {identity[:16]}...")


# -- re-import ----------------------------------------------------------------------------
def _bundle_events(root: Path) -> Iterator[dict]:
    with open(root / EVENTS, encoding="utf-8") as handle:
        for line in handle:
            yield json.loads(line)


def import_bundle(root: Path, store: MemoryStore) -> tuple[Partition, int]:
    """Load a verified bundle into `store` (which must not hold its identity yet): other
    events are appended as they are, and each consolidation pass is run again where the
    log says it ran (same range, same stamp), so its run and conflict events come out
    identical. Returns the partition and the number of passes re-run."""
    root = Path(root)
    verdict = verify_bundle(root)
    if not verdict.ok:
        raise BundleError(f"bundle does not verify: {verdict.problems[0]}")
    info = json.loads((root / INFO).read_text(encoding="utf-8"))
    config = RulesConfig.from_settings(info["rules_config"])
    partition = store.partition(info["identity_hash"])
    if partition.head()[0] != 0:
        raise BundleError(f"the store already holds events of identity "
                          f"{info['identity_hash'][:16]}...; import into a fresh store")
    pending: list[NewEvent] = []
    done_seq, passes = 0, 0
    for event in _bundle_events(root):
        if event["kind"] in (KNOWLEDGE_CONFLICT, KNOWLEDGE_CONFLICT_RESOLVED):
            continue  # the pass that follows writes them again
        if event["kind"] != CONSOLIDATION_RUN:
            pending.append(NewEvent(event["kind"], event["payload"], event["stamp_ns"]))
            if len(pending) >= 5000:
                partition.append_many(pending)
                pending = []
            continue
        if pending:
            partition.append_many(pending)
            pending = []
        until = facts_until_seq(event["payload"])
        consolidation_pass(partition, config, stamp_ns=event["stamp_ns"],
                           max_events=until - done_seq)
        passes += 1
        done_seq = int(event["payload"]["last_seq"])
        head = partition.head()
        if head != (event["seq"], event["event_hash"]):
            raise BundleError(f"{EVENTS}:{event['seq']}: the consolidation pass re-run here "
                              f"wrote other events (head seq {head[0]}); the rules differ "
                              "from the ones that made the bundle")
    if pending:
        partition.append_many(pending)
    head = partition.head()
    if head != (info["chain_head"]["seq"], info["chain_head"]["event_hash"]):
        raise BundleError(f"re-imported chain ends at seq {head[0]}, the bundle at "
                          f"{info['chain_head']['seq']}")
    return partition, passes

"""verify-bundle: an evidence bundle checked without the store.

The checksums, each line's canonical form, the hash chain, the derived files, and the
facts rebuilt from the events (byte-equal). A problem names the file and the line; a
file whose checksum no longer matches is named first.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from robot_memory.evidence.bundle_format import (
    ADDED_RULE_PARAMETERS,
    CONSULTATIONS,
    EVENT_KEYS,
    EVENTS,
    FACTS,
    FORMAT,
    INFO,
    INFO_KEYS,
    MANIFEST,
    RUNS,
    SUMS,
    bundle_rules_config,
    event_line,
    facts_lines,
    facts_until_seq,
    first_fact_difference,
    info_text,
    rules_config_json,
    sha256_file,
)
from robot_memory.canonical import canonical_json
from robot_memory.consolidation import RulesConfig, replay_snapshot
from robot_memory.consolidation.rules import RULE_VERSIONS, ConsolidationConfigError
from robot_memory.event_kinds import CONSOLIDATION_RUN, FACT_CONSULTATION
from robot_memory.store import MemoryStore, NewEvent, event_digest
from robot_memory.store.schema import GENESIS_HASH


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
        elif sha256_file(root / name) != digest:
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
                    detail = first_fact_difference(have, rebuilt, "bundle", "rebuilt")
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
    if info["rule_version"] not in RULE_VERSIONS:
        problems.add(INFO, INFO_KEYS.index("rule_version") + 2,
                     f"rules {info['rule_version']!r}; this robot_memory rebuilds with "
                     f"{list(RULE_VERSIONS)} (verify with that version)")
        return None
    try:
        config = bundle_rules_config(info)
    except (TypeError, ValueError, AttributeError, ConsolidationConfigError) as exc:
        problems.add(INFO, line, f"rules_config unusable: {exc}")
        return None
    # A bundle written before a parameter was added holds it at its default.
    written = {key: value for key, value in rules_config_json(config).items()
               if key in info["rules_config"] or key not in ADDED_RULE_PARAMETERS}
    if written != info["rules_config"]:
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

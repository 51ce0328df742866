"""The evidence bundle's files and their exact forms, shared by export and verify.

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
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from robot_memory.canonical import canonical_json
from robot_memory.consolidation import RulesConfig
from robot_memory.errors import InputError

FORMAT = "robot_memory bundle 1"
EVENTS, RUNS, CONSULTATIONS, FACTS = ("events.jsonl", "runs.jsonl", "consultations.jsonl",
                                      "facts.jsonl")
INFO, MANIFEST, SUMS = "bundle.json", "manifest.yaml", "SHA256SUMS"
EVENT_KEYS = ("event_hash", "kind", "payload", "prev_hash", "seq", "stamp_ns")
INFO_KEYS = ("format", "identity_hash", "chain_head", "rule_version", "rules_config",
             "facts_until_seq", "counts", "manifest")


class BundleError(InputError):
    """Raised when a bundle cannot be written (the target is not empty, the stored facts
    do not rebuild with the given rule parameters) or re-imported (the store already
    holds this identity, a pass does not regenerate identically)."""


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


# Rule parameters added after bundles were first written: a bundle without them was made
# with the rules its info's rule_version names and these at their defaults.
ADDED_RULE_PARAMETERS = ("rule_version", "change_drift", "change_threshold")


def bundle_rules_config(info: dict[str, Any]) -> RulesConfig:
    """The RulesConfig a bundle's info records (its rule_version wins)."""
    return RulesConfig.from_settings({**info["rules_config"],
                                      "rule_version": info["rule_version"]})


def facts_until_seq(run_payload: dict[str, Any] | None) -> int:
    """The log position the stored facts reflect: what the newest pass had read."""
    if run_payload is None:
        return 0
    return int(run_payload.get("override_seq", run_payload["last_seq"]))


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_sums(out: Path) -> None:
    names = sorted(p.name for p in out.iterdir() if p.is_file() and p.name != SUMS)
    (out / SUMS).write_text("".join(f"{sha256_file(out / n)}  {n}\n" for n in names),
                            encoding="utf-8")


def first_fact_difference(have: list[str], want: list[str], have_name: str = "stored",
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

"""Evidence bundles: one identity's memory as plain files a reviewer can check offline
(the files: bundle_format.py; the offline check: bundle_verify.py, both beside this one).

`export_bundle` writes one from a store; `import_bundle` loads a verified bundle into a
fresh store and re-runs the consolidation passes where the log says they ran, so the
store ends with the same chain head and byte-equal facts.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from robot_memory.evidence.bundle_format import (
    CONSULTATIONS,
    EVENTS,
    FACTS,
    FORMAT,
    INFO,
    MANIFEST,
    RUNS,
    SUMS,
    BundleError,
    bundle_rules_config,
    event_line,
    facts_lines,
    facts_until_seq,
    first_fact_difference,
    info_text,
    rules_config_json,
    write_sums,
)
from robot_memory.evidence.bundle_verify import BundleVerdict, verify_bundle
from robot_memory.canonical import canonical_json
from robot_memory.consolidation import (
    RulesConfig,
    consolidation_pass,
    replay_snapshot,
)
from robot_memory.consolidation.checkpoint import ill_shaped_overrides
from robot_memory.consolidation.consolidation_pass import snapshot_entry
from robot_memory.event_kinds import (
    CONSOLIDATION_RUN,
    FACT_CONSULTATION,
    KNOWLEDGE_CONFLICT,
    KNOWLEDGE_CONFLICT_RESOLVED,
)
from robot_memory.store import MemoryStore, NewEvent, Partition

__all__ = ["CONSULTATIONS", "EVENTS", "FACTS", "INFO", "MANIFEST", "RUNS", "SUMS",
           "BundleError", "BundleVerdict", "ExportReport", "export_bundle", "import_bundle",
           "verify_bundle"]


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
    # The rules the store is consolidated with (those of its newest run).
    config = replace(config, rule_version=last_run["rule_version"]) if last_run else config
    rebuilt = facts_lines(replay_snapshot(partition, config, until_seq=until))
    if rebuilt != stored:
        shutil.rmtree(out)
        raise BundleError("the stored facts differ from the facts rebuilt from the log with "
                          f"these rule parameters ({first_fact_difference(stored, rebuilt)}); "
                          "give the consolidator's parameters with --param NAME=VALUE")
    (out / FACTS).write_text("".join(line + "\n" for line in stored), encoding="utf-8")
    if manifest_path is not None:
        shutil.copyfile(manifest_path, out / MANIFEST)
    counts["facts"] = len(stored)
    info = {"format": FORMAT, "identity_hash": partition.identity_hash,
            "chain_head": {"seq": head[0], "event_hash": head[1]},
            "rule_version": config.rule_version, "rules_config": rules_config_json(config),
            "facts_until_seq": until, "counts": counts,
            "manifest": MANIFEST if manifest_path is not None else None}
    (out / INFO).write_text(info_text(info), encoding="utf-8")
    write_sums(out)
    return ExportReport(out, counts["events"], len(stored), head)


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
    config = bundle_rules_config(info)
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
            skipped = ill_shaped_overrides(partition)
            why = (f"; its log holds {len(skipped)} operator fact(s) without their kind's "
                   f"shape, which this version skips ({skipped[0].describe()}"
                   f"{', ...' if len(skipped) > 1 else ''})") if skipped else ""
            raise BundleError(f"{EVENTS}:{event['seq']}: the consolidation pass re-run here "
                              f"wrote other events (head seq {head[0]}); the rules differ "
                              f"from the ones that made the bundle{why}")
    if pending:
        partition.append_many(pending)
    head = partition.head()
    if head != (info["chain_head"]["seq"], info["chain_head"]["event_hash"]):
        raise BundleError(f"re-imported chain ends at seq {head[0]}, the bundle at "
                          f"{info['chain_head']['seq']}")
    return partition, passes

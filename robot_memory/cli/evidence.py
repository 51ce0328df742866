"""Verbs over evidence bundles and reports: `export`, `verify-bundle`, `import-bundle`,
`report`."""

from __future__ import annotations

import sys
from pathlib import Path

from robot_memory.cli.common import (CommandError, parse_overrides, partition_from_args,
                                     rules_config_from_args)
from robot_memory.errors import InputError


def cmd_export(args) -> int:
    from robot_memory.evidence.bundle import export_bundle
    report = export_bundle(partition_from_args(args), Path(args.out), rules_config_from_args(args),
                           Path(args.manifest) if args.manifest else None)
    print(f"bundle written to {report.out}: {report.events} events, {report.facts} facts, "
          f"chain head seq {report.chain_head[0]} {report.chain_head[1][:16]}; check it with "
          f"`robot-memory verify-bundle {report.out}`")
    return 0


def cmd_verify_bundle(args) -> int:
    from robot_memory.evidence.bundle import verify_bundle
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
    from robot_memory.evidence.bundle import import_bundle
    from robot_memory.store import MemoryStore
    partition, passes = import_bundle(Path(args.dir), MemoryStore(args.db))
    seq, head = partition.head()
    print(f"imported {seq} events (identity {partition.identity_hash}), re-ran {passes} "
          f"consolidation passes; chain head seq {seq} {head[:16]} as in the bundle")
    return 0


# The report reads the rules (consolidator) and the growth guard (episodic_logger).
REPORT_NODES = ("consolidator", "episodic_logger")


def cmd_report(args) -> int:
    from robot_memory.retention.growth import GrowthGuard
    from robot_memory.operation.parameters import node_settings
    from robot_memory.report.page import build_report
    try:
        logger = node_settings("episodic_logger", parse_overrides(args.param, REPORT_NODES))
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    guard = GrowthGuard(logger["growth_limit_mb"], logger["hard_limit_mb"])
    page = build_report(partition_from_args(args),
                        rules_config_from_args(args, REPORT_NODES), guard)
    Path(args.out).write_text(page, encoding="utf-8")
    print(f"report written to {args.out} ({len(page) // 1024} KiB, self-contained: open it "
          "in any browser, offline)")
    return 0

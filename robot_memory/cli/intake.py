"""Verbs that bring results in: `ingest` (JSON lines) and `import-bag` (rosbag2)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from robot_memory.cli.common import partition_from_args, time_ns_of


def cmd_ingest(args) -> int:
    from robot_memory.intake.admission import Admission, Refused
    from robot_memory.intake.json_lines import line_fields, lines
    partition = partition_from_args(args)
    # The one admission every path uses: the same checks, reasons and privacy_rejection
    # events as the logger and import-bag; the receipt time is this machine's clock.
    admission = Admission(max_clock_ahead_s=args.max_clock_ahead_s)
    good, refusals, skewed = [], [], 0
    name = Path(args.jsonl).name
    with open(args.jsonl, "rb") as handle:
        for number, line in enumerate(lines(handle), start=1):
            if line is not None and not line.strip():
                continue
            taken = admission.admit(line_fields, line, f"ingest {name}:{number}",
                                    time.time_ns())
            if type(taken) is Refused:
                print(f"{args.jsonl}:{number}: rejected: {taken.detail} "
                      f"(reason {taken.reason})", file=sys.stderr)
                if taken.event is not None:  # as the logger and import-bag do
                    refusals.append(taken.event)
                continue
            if admission.clock_skew > skewed:  # this one
                skewed += 1
                print(f"{args.jsonl}:{number}: stamp more than {args.max_clock_ahead_s} s "
                      "ahead of this machine's clock: stored at its receipt time "
                      "(clock_skew)", file=sys.stderr)
            good.append(taken)
    events = good + refusals
    for start in range(0, len(events), 5000):
        partition.append_many(events[start:start + 5000])
    bad = sum(admission.rejected.values())
    by_reason = ", ".join(f"{reason} {n}" for reason, n in sorted(admission.rejected.items()))
    print(f"ingested {len(good)} execution results, rejected {bad} lines "
          f"(identity {partition.identity_hash})"
          + (f"; rejected by reason: {by_reason}" if bad else "")
          + (f"; {skewed} stamped ahead, stored at receipt (clock_skew)" if skewed else ""))
    return 1 if bad else 0


def cmd_import_bag(args) -> int:
    from robot_memory.bags.mapping import load_mapping
    from robot_memory.bags.importing import import_bag
    partition = partition_from_args(args)
    # A bag or mapping file that cannot be read raises an InputError (one line, exit 3).
    mapping = load_mapping(Path(args.map)) if args.map else None
    report = import_bag(
        partition, Path(args.path), topics=args.topic or None,
        since_ns=time_ns_of(args.since, "--since") if args.since else None,
        until_ns=time_ns_of(args.until, "--until") if args.until else None,
        mapping=mapping, progress=False if args.no_progress else None,
        on_rejection=lambda r: print(f"{args.path}: {r.describe()}", file=sys.stderr))
    for note in report.damage:
        print(f"{args.path}: could not read: {note}", file=sys.stderr)
    for topic, missing in sorted(report.unread.items()):
        print(f"{args.path}: could not read: {missing} of the messages the bag lists on "
              f"{topic}", file=sys.stderr)
    print(report.summary())
    return 0 if report.complete else 1

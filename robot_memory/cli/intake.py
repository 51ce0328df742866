"""Verbs that bring results in: `ingest` (JSON lines) and `import-bag` (rosbag2)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from robot_memory.cli.common import partition_from_args, stamp_ns_of, time_ns_of

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
    from robot_memory.event_kinds import PRIVACY_REJECTION
    from robot_memory.intake.ingest import PRIVACY_PREFIX
    from robot_memory.intake.receipt import at_receipt, seconds_to_ns
    from robot_memory.intake.records import InvalidRecord, validate_record
    from robot_memory.store import NewEvent
    max_ahead_ns, skewed, refusals = seconds_to_ns(args.max_clock_ahead_s), 0, []
    partition = partition_from_args(args)
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
                data["stamp_ns"] = stamp_ns_of(data.pop("stamp"))
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

"""Verbs that check and bound the store: `verify`, `keygen`, `checkpoint`, `compact`,
`forget-segment`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from robot_memory.cli.common import (CommandError, archive_dir_from_args, identity_from_args,
                                     partition_from_args, rules_config_from_args,
                                     segments_with_fleet, time_ns_of)
from robot_memory.errors import StoreIntegrityError


def cmd_verify(args) -> int:
    from robot_memory.store import check_store
    if bool(args.witness) != bool(args.public_key):
        raise CommandError("--witness and --public-key go together")
    identity = identity_from_args(args) if (args.manifest or args.identity) else None
    verdict = check_store(args.db, identity, full=args.full)
    if verdict.open_error is not None and not isinstance(verdict.open_error,
                                                         StoreIntegrityError):
        raise verdict.open_error  # locked, unreachable, bad URL: not a verdict on the data
    for line in verdict.lines:
        print(line)
    ok = verdict.ok
    if args.witness:
        ok = _verify_witness(args, identity) and ok
    if verdict.open_error is None or args.archives or args.fleet:
        ok = _with_archives(args, identity, verdict) and ok
    return _conclude(args, ok)


def _with_archives(args, identity: str | None, verdict) -> bool:
    """The tier audit and the archive check, over the segments in --archives, or with
    --fleet over those plus the fleet store's copies of the ones not there."""
    from robot_memory.retention.compaction import default_archive_dir
    from robot_memory.store import MemoryStore
    local = Path(args.archives) if args.archives else (
        default_archive_dir(args.db) if args.fleet else None)
    if local is None:
        return _audit_tiers(args, verdict, None)
    store = MemoryStore(args.db)
    try:
        identities = [identity] if identity else store.identities()
        with segments_with_fleet(args, store, identities, local, sys.stdout) as archives:
            ok = verdict.open_error is not None or _audit_tiers(args, verdict, archives)
            if archives is not None:
                ok = _verify_archives(store, identities, archives) and ok
    finally:
        store.close()
    return ok


def _conclude(args, ok: bool) -> int:
    print(("store verified" if ok else "STORE CORRUPTED") +
          (" (full check)" if args.full else " (boot check; --full re-hashes every event)"))
    return 0 if ok else 1


def _audit_tiers(args, verdict, archives: Path | None) -> bool:
    """Name the first fact or state that differs from its digest (with --full: rebuild
    the whole tier from the log and compare every row)."""
    from robot_memory.store import MemoryStore
    from robot_memory.consolidation.tier_audit import locate_difference, rederive
    differing = [t for t in verdict.tiers if not t.ok and not t.problem]
    if not (args.full and verdict.tiers) and not differing:
        return True
    config = rules_config_from_args(args)
    store = MemoryStore(args.db)
    try:
        ok = True
        for tier in verdict.tiers if args.full else differing:
            partition = store.partition(tier.identity_hash)
            audit = rederive(partition, config, archives) if args.full else \
                locate_difference(partition, config)
            print(audit.describe())
            ok = ok and audit.ok
    finally:
        store.close()
    return ok


def _verify_archives(store, identities: list[str], archives: Path) -> bool:
    """Every segment the compactions wrote re-hashes to what they recorded."""
    from robot_memory.retention.archives import verify_archives
    ok = True
    for ident in identities:
        report = verify_archives(store.partition(ident), archives)
        print(report.describe())
        ok = ok and report.ok
    return ok


def _verify_witness(args, identity: str | None) -> bool:
    """Does the chain still extend the newest checkpoint signed in the witness file?"""
    from robot_memory.store import MemoryStore
    from robot_memory.evidence.witness import load_public_key, verify_witness
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
    from robot_memory.evidence.witness import generate_key_pair, load_public_key
    from robot_memory.operation.operator_credentials import key_id
    if args.operator:  # before any file is written
        from robot_memory.operation.operator_credentials import check_name
        check_name(args.operator)
    private_path, public_path = generate_key_pair(args.out)
    public_key = load_public_key(public_path)
    print(f"private key {private_path} (mode 0600), public key {public_path} "
          f"(key id {key_id(public_key)})")
    if args.operator:
        from robot_memory.operation.operator_credentials import key_line
        print("operator_keys line (the parameter's entry, or a line of operator_keys_file):")
        print(key_line(args.operator, public_key))
    return 0


def cmd_checkpoint(args) -> int:

    from robot_memory.evidence.witness import checkpoint_head, load_private_key
    key = load_private_key(args.key)
    partition = partition_from_args(args)
    try:
        signed = checkpoint_head(partition, key, args.witness, time.time_ns())
    finally:
        partition.store.close()
    print(f"signed checkpoint seq {signed.checkpoint.seq} hash "
          f"{signed.checkpoint.event_hash} (key {signed.key_id}) appended to {args.witness}")
    return 0


def cmd_compact(args) -> int:
    from robot_memory.retention.compaction import compact, seq_before
    partition = partition_from_args(args)
    if args.before is not None:
        until = seq_before(partition, event_id=args.before)
    elif args.before_time is not None:
        until = seq_before(partition, stamp_ns=time_ns_of(args.before_time, "--before-time"))
    else:
        until = partition.head()[0]
    report = compact(partition, until, archive_dir_from_args(args))
    print(report.describe())
    return 0


def cmd_forget_segment(args) -> int:
    from robot_memory.retention.archives import forget_segment
    partition = partition_from_args(args)
    c = forget_segment(partition, archive_dir_from_args(args), args.segment, args.operator,
                       args.reason)
    print(f"forgot segment {args.segment} (seq {c.from_seq}..{c.until_seq}); logged as a "
          "segment_forgotten event")
    return 0

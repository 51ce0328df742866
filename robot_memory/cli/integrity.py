"""Verbs that check and bound the store: `verify`, `keygen`, `checkpoint`, `compact`,
`forget-segment`."""

from __future__ import annotations

import time
from pathlib import Path

from robot_memory.cli.common import (CommandError, archive_dir_from_args, identity_from_args,
                                     partition_from_args, rules_config_from_args, time_ns_of)
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
    if verdict.open_error is None:
        ok = _audit_tiers(args, verdict) and ok
    if args.witness:
        ok = _verify_witness(args, identity) and ok
    if args.archives:
        ok = _verify_archives(args, identity) and ok
    print(("store verified" if ok else "STORE CORRUPTED") +
          (" (full check)" if args.full else " (boot check; --full re-hashes every event)"))
    return 0 if ok else 1


def _audit_tiers(args, verdict) -> bool:
    """Name the first fact or state that differs from its digest (with --full: rebuild
    the whole tier from the log and compare every row)."""
    from robot_memory.store import MemoryStore
    from robot_memory.consolidation.tier_audit import locate_difference, rederive
    differing = [t for t in verdict.tiers if not t.ok and not t.problem]
    if not (args.full and verdict.tiers) and not differing:
        return True
    config = rules_config_from_args(args)
    archives = Path(args.archives) if args.archives else None
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


def _verify_archives(args, identity: str | None) -> bool:
    """Every segment the compactions wrote re-hashes to what they recorded."""
    from robot_memory.retention.archives import verify_archives
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

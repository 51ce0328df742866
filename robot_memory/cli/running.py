"""Verbs that set things up and run them: `hash`, `db`, `migrate`, `bringup`, `demo`."""

from __future__ import annotations

from pathlib import Path

from robot_memory.cli.common import (CommandError, check_url, identity_from_args, parse_overrides,
                                     password_from_args)
from robot_memory.errors import InputError


def cmd_hash(args) -> int:
    from robot_memory.manifest import load_manifest
    print(load_manifest(args.manifest).identity_hash())
    return 0


def cmd_db(args) -> int:
    from sqlalchemy.exc import DBAPIError

    from robot_memory.store import MemoryStore
    from robot_memory.store.roles import (
        RoleError,
        add_analyst_role,
        add_priors_reader,
        add_robot_role,
        init_security,
        register_embodiment,
        security_statements,
    )
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
                identity = identity_from_args(args)
                add_robot_role(conn, args.role, identity, password_from_args(args))
                done = f"robot role {args.role} reads and writes identity {identity} only"
                if args.manifest:
                    done += _registered(conn, args.manifest, register_embodiment)
            elif args.action == "add-priors-reader":
                if not args.manifest:
                    raise CommandError("add-priors-reader needs --manifest: the robot's "
                                       "embodiment is read from it")
                identity = identity_from_args(args)
                embodiment = _registered(conn, args.manifest, register_embodiment)
                add_priors_reader(conn, args.role, identity, password_from_args(args))
                done = (f"priors reader {args.role} reads the facts of identity {identity}'s "
                        f"siblings{embodiment}")
            else:
                add_analyst_role(conn, args.role, password_from_args(args))
                done = f"analytics role {args.role} reads every robot's rows"
    except RoleError as exc:
        raise CommandError(str(exc)) from exc
    except DBAPIError as exc:
        raise CommandError(f"{args.db}: {str(exc.orig).strip().splitlines()[0]}") from exc
    finally:
        store.close()
    print(done)
    return 0


def _registered(conn, manifest_path: str, register) -> str:
    """Register the manifest's embodiment for its identity; say so."""
    from robot_memory.manifest import load_manifest
    manifest = load_manifest(manifest_path)
    register(conn, manifest.identity_hash(), manifest.agent_id, manifest.embodiment)
    return f"; embodiment {manifest.embodiment!r} registered"


def cmd_migrate(args) -> int:
    from robot_memory.store import MemoryStore
    store = MemoryStore(args.db)  # opening migrates: verified before and after, logged
    print(store.migration.summary() if store.migration else
          "store schema is current: nothing to migrate")
    store.close()
    return 0


def cmd_bringup(args) -> int:
    from robot_memory.operation.bringup import run_bringup
    from robot_memory.manifest import load_manifest, parse_certified_hash
    from robot_memory.operation.parameters import node_names
    overrides = parse_overrides(args.param, tuple(node_names()))
    check_url(args.db)
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
        check_url(args.db)
    return run_demo(db_url=args.db, period_s=args.period, keep=args.keep)

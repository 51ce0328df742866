"""What the verbs share: the store and identity options, parsing of stamps, times and
--param, and the argument errors."""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from robot_memory.errors import (UsageError, from_foreign)

DEFAULT_DB = "sqlite:///$ROS_HOME/robot_memory/robot_memory.db"  # the nodes' default store


# Set to 1 to get the traceback of an unexpected error instead of its one line.
TRACEBACK_ENV = "ROBOT_MEMORY_TRACEBACK"


class CommandError(UsageError):
    """Raised by a verb for arguments it refuses; printed without a traceback (exit 2)."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are a UsageError (one line, exit 2) instead of usage + exit."""

    verbs = None  # the subcommands' action, once add_subparsers made it (docs/cli.md)

    def add_subparsers(self, **kwargs):
        self.verbs = super().add_subparsers(**kwargs)
        return self.verbs

    def error(self, message: str):
        error = UsageError(f"{message} (see {self.prog} --help)")
        error.prog = self.prog  # the (sub)command whose arguments were refused
        raise error


def identity_from_args(args) -> str:
    from robot_memory.manifest import load_manifest, parse_certified_hash
    if getattr(args, "identity", None):
        return parse_certified_hash(args.identity, "--identity")
    if getattr(args, "manifest", None):
        return load_manifest(args.manifest).identity_hash()
    raise CommandError("give --manifest PATH or --identity HASH")


def partition_from_args(args):
    from robot_memory.store import MemoryStore
    return MemoryStore(args.db).partition(identity_from_args(args))


def stamp_ns_of(value: Any) -> int:
    """Seconds (--since, --until) as int64 nanoseconds, checked as a JSON line's stamp
    is; ValueError says why not."""
    from robot_memory.intake.json_lines import stamp_seconds_to_ns
    from robot_memory.intake.records import InvalidRecord
    try:
        return stamp_seconds_to_ns(value)
    except InvalidRecord as exc:
        raise ValueError(f"stamp {exc.detail}") from None


def rules_config_from_args(args, nodes: tuple[str, ...] = ("consolidator",)):
    """The consolidator node's rules, with --param overrides (same names and checks;
    `nodes` are the nodes whose parameter names the verb accepts)."""
    from robot_memory.consolidation import RulesConfig
    from robot_memory.operation.parameters import node_settings
    try:
        return RulesConfig.from_settings(node_settings("consolidator",
                                                       parse_overrides(args.param, nodes)))
    except ValueError as exc:
        raise CommandError(str(exc)) from exc


def parse_overrides(pairs: list[str], nodes: tuple[str, ...]) -> dict[str, Any]:
    """--param NAME=VALUE pairs (VALUE read as YAML); a NAME none of `nodes` declares is
    refused (UnknownParameter), not ignored."""
    import yaml

    from robot_memory.operation.parameters import check_names
    overrides = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep:
            raise CommandError(f"--param {pair!r}: expected NAME=VALUE")
        try:
            overrides[name] = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise CommandError(f"--param {pair!r}: VALUE is not YAML") from exc
    check_names(overrides, nodes)
    return overrides


def time_ns_of(text: str, flag: str) -> int:
    """Seconds (event time) or an ISO 8601 time, as nanoseconds."""
    from datetime import datetime, timezone
    try:
        return stamp_ns_of(float(text))
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise CommandError(f"{flag} {text!r}: expected seconds or an ISO time") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return stamp_ns_of(repr(moment.timestamp()))


def archive_dir_from_args(args) -> Path:
    from robot_memory.retention.compaction import default_archive_dir
    return Path(args.archive_dir) if args.archive_dir else default_archive_dir(args.db)


@contextmanager
def segments_with_fleet(args, store, identities: list[str], local_dir: Path | None,
                        out: TextIO) -> Iterator[Path | None]:
    """`local_dir` when no --fleet is given; else a scratch folder holding every segment
    of these identities' compactions: the robot's own where intact, the rest fetched
    from the fleet store (checked against the chain), each identity's tally said on
    `out`. The folder is removed on exit."""
    if not getattr(args, "fleet", None):
        yield local_dir
        return
    from robot_memory.retention.destinations import destination_from_url
    from robot_memory.retention.fleet_history import gather_segments
    destination = destination_from_url(args.fleet, "--fleet")
    try:
        with tempfile.TemporaryDirectory(prefix="robot_memory_fleet_") as scratch:
            for identity in identities:
                gathered = gather_segments(store.partition(identity),
                                           local_dir or Path(scratch) / "none",
                                           destination, Path(scratch))
                print(f"{gathered.describe()} ({destination.describe()})", file=out)
            yield Path(scratch)
    finally:
        destination.close()


def check_url(url: str) -> None:
    """Refuse a URL SQLAlchemy cannot use before any node or process starts."""
    from sqlalchemy.engine import make_url
    try:
        make_url(url).get_dialect()
    except Exception as exc:  # ArgumentError, NoSuchModuleError, a missing driver
        raise from_foreign(exc, f"--db {url}") or exc


def password_from_args(args) -> str | None:
    if not args.password_file:
        return None
    return Path(args.password_file).read_text(encoding="utf-8").strip()

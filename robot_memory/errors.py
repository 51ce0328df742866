"""The exceptions of robot_memory: one base, a few families, one exit code per family.

Every error the core raises on purpose is a `RobotMemoryError`, so a caller (the command
line, a node's service callback) catches one class. Each carries `field` (what is at
fault: a file, a parameter, a record field, the store URL; may be empty), `reason` (a
short stable code a test or a counter can match) and `detail` (the sentence a human
reads). `str(error)` is the one line the command line prints.

    RobotMemoryError                      exit 1  anything not below
    ├── UsageError                        exit 2  arguments the command cannot take
    │   ├── cli.CommandError                      a verb refuses its arguments
    │   ├── UnknownParameter                      --param NAME no node declares
    │   └── operation.parameters.InvalidParameterValue  a value of the wrong type or range
    ├── InputError                        exit 3  a file or value given is missing/invalid
    │   ├── manifest.ManifestError                identity manifest, certified hash
    │   ├── execution_result.InvalidRecord        an execution result, field by field
    │   ├── consolidation.override_records.OverrideError  an override that cannot be recorded
    │   ├── grounding.explain.FactNotFound        no such fact for this identity
    │   ├── grounding.lineage.IntentNotFound      no event of this identity carries the intent
    │   ├── evidence.witness.WitnessError         a signing key or witness file unusable
    │   ├── operation.operator_credentials.OperatorKeysError  unreadable operator keys
    │   ├── operation.operator_credentials.CredentialRefused  a credential refused
    │   ├── store.roles.RoleError                 a role name or identity the fleet store refuses
    │   ├── grounding.priors_sources.PriorsError  a priors source that fails its check
    │   ├── operation.launch_parameters.ParamsFileError  a params_file that is no parameters file
    │   ├── operation.lifecycle_policy.SplitStack  a node's store is not the verifier's
    │   └── intake.admission.Refused              (internal: a result not admitted)
    ├── StoreFailure                      exit 4  the store cannot be opened or read
    │   ├── store.StoreError                      (bad URL, no driver, no server, schema)
    │   ├── intake.ingest.StoreWriteFailed        (an acknowledged write's transaction failed)
    │   ├── retention.compaction.CompactionError  a compaction refused; a segment it needs missing
    │   ├── retention.destinations.ShippingError  a segment not shipped, confirmed or fetched
    │   ├── store.fleet_segments.UploadMismatch   an upload whose stored bytes do not hash
    │   ├── StoreLocked                   exit 5  another connection holds the lock
    │   └── StoreIntegrityError           exit 6  the file or a chain cannot be trusted
    │       ├── store.integrity.StoreCorrupted
    │       ├── retention.segments.SegmentError  a segment unwritable, unreadable or damaged
    │       └── evidence.witness.WitnessLineError  an edited, unsigned or foreign witness line
    └── ConsolidationError                exit 7  a pass refused to run
        ├── consolidation.ConsolidationConfigError  time_bucket_s is not the store's
        └── consolidation.ConcurrentPass          another pass committed first (retry)

The family is `StoreFailure` so that it does not clash with `store.StoreError`, the
class the store package has always raised. Exit code 1 is also what a verb returns when
it ran and found a problem it reports itself (`ingest` rejected lines, `verify` found a
broken chain).

Foreign errors are converted where they enter: `from_foreign` maps SQLAlchemy, YAML and
OS errors to the families above, naming the place (`--db`, a path) they concern.
"""

from __future__ import annotations

import errno
from typing import ClassVar

__all__ = ["ConsolidationError", "InputError", "RobotMemoryError", "StoreFailure",
           "StoreIntegrityError", "StoreLocked", "UnknownParameter", "UsageError",
           "EXIT_CODES", "exit_code_of", "from_foreign", "yaml_problem"]


class RobotMemoryError(Exception):
    """Base of every error robot_memory raises on purpose.

    Two forms: `RobotMemoryError(field, reason, detail)` (structured; the message is
    `field: detail`), or `RobotMemoryError(message)` (field empty, reason the class's
    default), which is how the older classes below were always raised.
    """

    exit_code: ClassVar[int] = 1
    default_reason: ClassVar[str] = "error"

    def __init__(self, field_or_message: object = "", reason: str = "", detail: str = ""):
        if reason or detail:
            field = str(field_or_message)
            message = f"{field}: {detail}" if field else detail
        else:
            field, message = "", str(field_or_message)
            detail = message
        super().__init__(message)
        self.field = field
        self.reason = reason or self.default_reason
        self.detail = detail


class UsageError(RobotMemoryError):
    """Raised when a command is given arguments it cannot take (argparse's own errors
    included); `field` names the option."""

    exit_code = 2
    default_reason = "usage"


class UnknownParameter(UsageError):
    """Raised when `--param NAME=VALUE` names a parameter the target node does not declare
    (a typo would otherwise be ignored silently)."""

    default_reason = "unknown_parameter"


class InputError(RobotMemoryError):
    """Raised when a file or value given (manifest, JSON lines, override, fact name) is
    missing, unreadable or invalid; `field` names the file or field."""

    exit_code = 3
    default_reason = "invalid_input"


class StoreFailure(RobotMemoryError):
    """Raised when the store cannot be opened or read: a malformed URL, a missing driver,
    an unreachable server, an unknown schema version. `field` is the URL option."""

    exit_code = 4
    default_reason = "store_unavailable"


class StoreLocked(StoreFailure):
    """Raised when another connection holds the database lock longer than the busy
    timeout (SQLite: `?timeout=SECONDS` in the URL, default 30). Retry later."""

    exit_code = 5
    default_reason = "store_locked"


class StoreIntegrityError(StoreFailure):
    """Raised when the store's file or a hash chain cannot be trusted (not a database,
    truncated, malformed). Never repaired automatically: see docs/operations.md."""

    exit_code = 6
    default_reason = "store_corrupted"


class ConsolidationError(RobotMemoryError):
    """Raised when a consolidation pass refuses to run (configuration that does not match
    the stored state, a concurrent pass)."""

    exit_code = 7
    default_reason = "consolidation_refused"


# The table `robot-memory --help` prints: exit code -> what it means.
EXIT_CODES: dict[int, str] = {
    0: "success",
    1: "the verb ran and found a problem it reports (ingest rejected lines, verify found "
       "a broken store), or an unexpected internal error",
    UsageError.exit_code: "bad arguments: unknown option or --param name, bad value",
    InputError.exit_code: "a file or value given is missing, unreadable or invalid "
                          "(manifest, JSON lines, override, fact)",
    StoreFailure.exit_code: "the store cannot be opened (malformed URL, missing driver, "
                            "server unreachable, unknown schema version)",
    StoreLocked.exit_code: "the database is locked by another connection (retry later)",
    StoreIntegrityError.exit_code: "the store cannot be trusted (not a database, truncated, "
                                   "malformed): see docs/operations.md",
    ConsolidationError.exit_code: "a consolidation pass refused to run (time_bucket_s "
                                  "differs from the store's, a concurrent pass)",
}


def exit_code_of(error: BaseException) -> int:
    """The documented exit code for `error` (1 for anything outside the hierarchy)."""
    return error.exit_code if isinstance(error, RobotMemoryError) else 1


_CORRUPT_MARKERS = ("file is not a database", "malformed", "file is encrypted",
                    "disk image", "not a database")


def from_foreign(error: BaseException, where: str = "") -> RobotMemoryError | None:
    """`error` as one of ours, or None when it is not a foreign error we know.

    `where` names what the operation concerned (`--db sqlite:///x.db`, a path) so the
    message says what and where. SQLAlchemy errors become store errors (locked, corrupt,
    unavailable), YAML errors and OS errors become input errors (a full disk a store error).
    """
    if isinstance(error, RobotMemoryError):
        return error
    try:  # SQLAlchemy is a dependency of the store only; keep this module import-light
        from sqlalchemy import exc as sa_exc
    except ImportError:  # pragma: no cover - SQLAlchemy is always installed with the store
        sa_exc = None
    if sa_exc is not None and isinstance(error, sa_exc.SQLAlchemyError):
        return _from_sqlalchemy(error, sa_exc, where or "store")
    try:
        import yaml
    except ImportError:  # pragma: no cover
        yaml = None
    if yaml is not None and isinstance(error, yaml.YAMLError):
        return InputError(where or "yaml", "not_yaml", f"not valid YAML: {yaml_problem(error)}")
    if isinstance(error, OSError):
        path = error.filename or where or "file"
        text = error.strerror or str(error)
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            return StoreFailure(path, "disk_full", text)
        if isinstance(error, FileNotFoundError):
            return InputError(path, "missing_file", "no such file")
        if isinstance(error, PermissionError):
            return InputError(path, "permission_denied", "permission denied")
        return InputError(path, "os_error", text)
    return None


def yaml_problem(error: BaseException) -> str:
    """A YAML error in one line: `line L column C: problem` (PyYAML's own is several)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    return f"line {mark.line + 1} column {mark.column + 1}: {problem}" if mark else problem


def _from_sqlalchemy(error, sa_exc, where: str) -> RobotMemoryError:
    original = getattr(error, "orig", None)
    text = str(original if original is not None else error).splitlines()[0].strip()
    lowered = text.lower()
    if isinstance(error, (sa_exc.ArgumentError, sa_exc.NoSuchModuleError)):
        return StoreFailure(where, "bad_url", f"not a usable database URL ({text})")
    if "locked" in lowered or "could not obtain lock" in lowered:
        return StoreLocked(where, "store_locked",
                           f"database is locked by another connection ({text}); retry later")
    if any(marker in lowered for marker in _CORRUPT_MARKERS):
        return StoreIntegrityError(where, "store_corrupted",
                                   f"{text}; run `robot-memory verify --full` and see "
                                   f"docs/operations.md (never edit the store)")
    if "unable to open database file" in lowered:
        return StoreFailure(where, "cannot_open", "unable to open the database file "
                                                  "(does its folder exist, may it be written?)")
    if isinstance(error, sa_exc.InterfaceError) or isinstance(error, sa_exc.OperationalError):
        return StoreFailure(where, "store_unavailable", text)
    return StoreFailure(where, "store_error", f"{type(error).__name__}: {text}")

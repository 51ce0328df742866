"""Where sealed segments are shipped (robot_memory/retention/shipping.py): one interface,
`SegmentDestination`, and two places behind it:

- `FleetStoreDestination`: the fleet's PostgreSQL (robot_memory/store/fleet_segments.py),
  reached as the robot's own login role, so row-level security lets it add and read its
  own segments and none of another robot's;
- `FolderDestination`: a mounted folder, one sub-folder per identity; a file is copied
  under a temporary name, synced, renamed, and re-hashed.

Each destination re-computes the SHA-256 of what it holds before a segment counts as
there (`confirm`), and checks what it hands back (`fetch`). `describe` and every error
text name the destination without its password.
"""

from __future__ import annotations

import hashlib
import os
from abc import ABC, abstractmethod
from pathlib import Path

from sqlalchemy import URL, create_engine, make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from robot_memory.errors import StoreFailure
from robot_memory.retention.segments import file_sha256, sync_directory
from robot_memory.store.fleet_segments import (UploadMismatch, confirmed_upload, insert_upload,
                                               read_upload)

# Seconds a connection attempt to the fleet store may take before it counts as failed:
# shipping runs between passes and must not hang on an unreachable server.
CONNECT_TIMEOUT_S = 5
# The bytes of one stored chunk of a segment (one row of fleet_segment_chunks).
CHUNK_BYTES = 1 << 20
# The longest error text kept from a failure (the driver's first line, trimmed).
ERROR_TEXT_LIMIT = 300


class ShippingError(StoreFailure):
    """A segment that could not be shipped, confirmed or fetched, naming the segment and
    the destination (never its password)."""


class SegmentDestination(ABC):
    """A place that keeps sealed segments of robots, keyed by identity and file name."""

    @abstractmethod
    def describe(self) -> str:
        """Where it is, as a receipt records it: no password."""

    @abstractmethod
    def upload(self, identity_hash: str, segment: str, sha256: str, path: Path,
               stamp_ns: int) -> None:
        """Store the file at `path` as that segment; ShippingError when it is not stored
        whole (nothing partial is left that `confirm` could take for it)."""

    @abstractmethod
    def confirm(self, identity_hash: str, segment: str, sha256: str) -> int | None:
        """The size of a stored copy whose bytes re-hash to `sha256`, or None."""

    @abstractmethod
    def fetch(self, identity_hash: str, segment: str, sha256: str, into: Path) -> bool:
        """Write a confirmed copy to `into` (checked against `sha256`); False when the
        destination has none."""

    def close(self) -> None:
        """Let go of connections (nothing for a folder)."""


def is_folder(where: str) -> bool:
    return where.startswith("file://") or where.startswith("/")


def destination_from_url(where: str, what: str = "fleet_store_url") -> SegmentDestination:
    """A SQLAlchemy PostgreSQL URL, or a folder (`file:///mnt/fleet` or an absolute path);
    ShippingError naming `what` (the parameter or option) for anything else."""
    if is_folder(where):
        return FolderDestination(Path(where.removeprefix("file://")))
    try:
        return FleetStoreDestination(where)
    except ShippingError as exc:
        raise ShippingError(what, "bad_fleet_store", exc.detail) from None
    except Exception as exc:  # not a URL, or no driver for it
        raise ShippingError(what, "bad_fleet_store",
                            f"{without_password(where)} is neither a PostgreSQL URL "
                            "(postgresql+psycopg://ROLE@HOST/DB) nor a folder "
                            f"(file:///PATH or /PATH): {error_text(exc)}") from None


def without_password(url: str) -> str:
    """The URL with any password left out (not masked: nothing of it is shown)."""
    try:
        parsed = make_url(url)
        # URL.set(password=None) keeps the password (None means "unchanged" there).
        return URL.create(parsed.drivername, parsed.username, None, parsed.host, parsed.port,
                          parsed.database, parsed.query).render_as_string(hide_password=False)
    except Exception:  # not a URL SQLAlchemy reads: nothing of it is shown
        return "(a text that is not a URL)"


def error_text(exc: BaseException, secret: str | None = None) -> str:
    """One short line for a failure: the driver's own message, never the statement or
    its parameters (a segment's bytes), nor `secret`."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        message = f"{type(exc.orig).__name__}: {exc.orig}"
    elif isinstance(exc, SQLAlchemyError):
        message = f"{type(exc).__name__}: {exc.args[0] if exc.args else exc}"
    else:
        message = f"{type(exc).__name__}: {exc}"
    line = " ".join(message.split())
    if secret:
        line = line.replace(secret, "***")
    return line[:ERROR_TEXT_LIMIT]


class FleetStoreDestination(SegmentDestination):
    """Segments as rows of the fleet's PostgreSQL (schema 7's fleet_segments), written and
    read as the login role in the URL."""

    def __init__(self, url: str, chunk_bytes: int = CHUNK_BYTES):
        parsed = make_url(url)
        if not parsed.drivername.startswith("postgresql"):
            raise ShippingError(f"fleet store {without_password(url)}: a PostgreSQL URL "
                                "(postgresql+psycopg://ROLE@HOST/DB) or a folder is needed")
        self._secret = parsed.password
        self.chunk_bytes = chunk_bytes
        self.where = without_password(url)
        self.engine = create_engine(url, pool_pre_ping=True,
                                    connect_args={"connect_timeout": CONNECT_TIMEOUT_S})

    def describe(self) -> str:
        return self.where

    def _failure(self, what: str, exc: BaseException) -> ShippingError:
        return ShippingError(f"{what} at {self.where}: {error_text(exc, self._secret)}")

    def upload(self, identity_hash, segment, sha256, path, stamp_ns):
        try:
            with self.engine.begin() as conn, open(path, "rb") as f:
                insert_upload(conn, identity_hash, segment, sha256,
                              iter(lambda: f.read(self.chunk_bytes), b""), stamp_ns)
        except UploadMismatch as exc:
            raise ShippingError(f"{exc} ({self.where}; rolled back)") from None
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure(f"cannot upload segment {segment}", exc) from None

    def confirm(self, identity_hash, segment, sha256):
        try:
            with self.engine.begin() as conn:
                found = confirmed_upload(conn, identity_hash, segment, sha256)
        except SQLAlchemyError as exc:
            raise self._failure(f"cannot read segment {segment} back", exc) from None
        return None if found is None else found.size_bytes

    def fetch(self, identity_hash, segment, sha256, into):
        try:
            with self.engine.begin() as conn:
                found = confirmed_upload(conn, identity_hash, segment, sha256)
                if found is None:
                    return False
                _write_checked(into, read_upload(conn, found.upload_id), sha256)
        except SQLAlchemyError as exc:
            raise self._failure(f"cannot fetch segment {segment}", exc) from None
        return True

    def close(self):
        self.engine.dispose()


class FolderDestination(SegmentDestination):
    """Segments as files under `root/<identity hash>/` (a mounted share, a USB disk)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def describe(self) -> str:
        return f"file://{self.root}"

    def _path(self, identity_hash: str, segment: str) -> Path:
        if "/" in segment or segment.startswith("."):
            raise ShippingError(f"segment name {segment!r} is not a plain file name")
        return self.root / identity_hash / segment

    def upload(self, identity_hash, segment, sha256, path, stamp_ns):
        target = self._path(identity_hash, segment)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "rb") as source:
                _write_checked(target, iter(lambda: source.read(CHUNK_BYTES), b""), sha256)
        except (OSError, ShippingError) as exc:
            raise ShippingError(f"cannot copy segment {segment} to {target.parent}: "
                                f"{error_text(exc)}") from None

    def confirm(self, identity_hash, segment, sha256):
        target = self._path(identity_hash, segment)
        try:
            if target.is_file() and file_sha256(target) == sha256:
                return target.stat().st_size
        except OSError as exc:
            raise ShippingError(f"cannot read segment {segment} back from {target.parent}: "
                                f"{error_text(exc)}") from None
        return None

    def fetch(self, identity_hash, segment, sha256, into):
        if self.confirm(identity_hash, segment, sha256) is None:
            return False
        with open(self._path(identity_hash, segment), "rb") as source:
            _write_checked(into, iter(lambda: source.read(CHUNK_BYTES), b""), sha256)
        return True


def _write_checked(target: Path, chunks, sha256: str) -> None:
    """Write the chunks to a temporary name beside `target`, sync, check the SHA-256,
    then rename: `target` is never a partial or a different file."""
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    try:
        with open(partial, "wb") as out:
            for chunk in chunks:
                digest.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != sha256:
            raise ShippingError(f"{target.name}: the copy hashes to "
                                f"{digest.hexdigest()[:12]}, not {sha256[:12]}")
        os.replace(partial, target)
        sync_directory(target.parent)
    finally:
        if partial.exists():
            partial.unlink()


__all__ = ["CHUNK_BYTES", "FleetStoreDestination", "FolderDestination", "SegmentDestination",
           "ShippingError", "destination_from_url", "error_text", "is_folder",
           "without_password"]

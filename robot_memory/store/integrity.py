"""Integrity checks: can the store be trusted before anything is served from it?

Two depths:
- `boot_check` (what the verifier runs before activating the nodes, bounded so that it
  stays short on a large store: docs/performance.md, Boot check): the file is whole, the
  schema known, every row of the chain is present (count, head), the last verified
  checkpoint still holds, every event after it re-hashes, and a rotating sample of older
  events re-hashes too.
- `full_check` (`robot-memory verify --full`, and the verifier in the background after
  boot): SQLite's own integrity_check and a re-hash of every event of every chain.
At both depths, once a chain is intact, its semantic tier (facts and states) must hash
to the digest its newest consolidation run recorded (store/tier_check.py).
Both name the first problem: what, which table, which event (id and chain position).
Neither repairs anything. Here: the checks of the file, and `check_store`, which runs
either depth over every chain; the re-hash of one chain is store/chain_check.py.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from sqlalchemy.exc import SQLAlchemyError

from robot_memory.errors import RobotMemoryError, StoreIntegrityError, from_foreign
from robot_memory.store.chain_check import BOOT_SAMPLE_EVENTS, boot_check, verify_chain
from robot_memory.store.opening import MemoryStore
from robot_memory.store.tier_check import TierReport, check_tier


class StoreCorrupted(StoreIntegrityError):
    """The store file itself cannot be trusted (truncated, malformed, unreadable)."""


def sqlite_path(url: str) -> str | None:
    """The file behind a sqlite:/// URL (None for memory databases and other drivers)."""
    if not url.startswith("sqlite:///"):
        return None
    path = url[len("sqlite:///"):].split("?", 1)[0]
    return path if path and path != ":memory:" else None


def file_problem(url: str) -> str:
    """Cheap file-level checks before SQLite opens the file: it exists, has a SQLite
    header, and is as long as the header says (a cut file is refused, not half-read)."""
    path = sqlite_path(url)
    if path is None or not os.path.exists(path):
        return ""
    size = os.path.getsize(path)
    if size == 0:
        return ""  # a new store
    with open(path, "rb") as handle:
        header = handle.read(100)
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return f"{path}: not a SQLite database (header missing or damaged, {size} bytes)"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The in-header size is valid when its change counter matches (offsets 24 and 92).
    if header[24:28] == header[92:96] and size < pages * page_size:
        missing = range(size // page_size + 1, pages + 1)
        if set(missing) <= wal_pages(path, page_size):
            # A checkpoint cut short (a crash): SQLite writes page 1, with the new size,
            # before the pages after it, and finishes from the WAL on the next open.
            return ""
        return (f"{path}: truncated: {size} bytes, the header says {pages} pages of "
                f"{page_size} bytes ({pages * page_size} bytes)")
    return ""


def wal_pages(path: str, page_size: int) -> set[int]:
    """Page numbers the database's write-ahead log holds frames of (those of the WAL's
    current generation: a frame whose salts differ from the header's is left over)."""
    wal = f"{path}-wal"
    if not os.path.exists(wal):
        return set()
    pages = set()
    with open(wal, "rb") as handle:
        header = handle.read(32)
        if len(header) < 32 or int.from_bytes(header[8:12], "big") != page_size:
            return set()
        while len(frame := handle.read(24)) == 24 and frame[8:16] == header[16:24]:
            if len(handle.read(page_size)) < page_size:
                break  # a frame cut short: never committed
            pages.add(int.from_bytes(frame[0:4], "big"))
    return pages


def sqlite_integrity_problem(store: MemoryStore) -> str:
    """SQLite's own integrity_check (every page, index and constraint); '' when ok."""
    if store.engine.dialect.name != "sqlite":
        return ""
    with store.read() as conn:
        rows = [r[0] for r in conn.exec_driver_sql("PRAGMA integrity_check").all()]
    return "" if rows == ["ok"] else "SQLite integrity_check: " + "; ".join(rows[:5])


def _finished(check) -> str:
    """The SQLite check's finding ('' if none, or if it failed to run at all)."""
    if check is None:
        return ""
    try:
        return check.result()
    except SQLAlchemyError:
        return ""


@dataclass
class StoreVerdict:
    ok: bool
    lines: list[str]
    # Why the store could not be opened, as one of ours (a lock is not a corruption).
    open_error: RobotMemoryError | None = None
    # The semantic tier of each identity whose chain is intact, held to its digest.
    tiers: list[TierReport] = field(default_factory=list)


def check_store(url: str, identity_hash: str | None = None, full: bool = False,
                record: bool = False, sample: int = BOOT_SAMPLE_EVENTS) -> StoreVerdict:
    """Everything a human or the verifier needs to trust a store: the file, opening it
    (schema version), SQLite's own check (full only) and each identity's chain (all
    identities unless one is given). Never raises for a damaged store: says why."""
    problem = file_problem(url)
    if problem:
        return StoreVerdict(False, [f"store file: {problem}"])
    try:
        store = MemoryStore(url)
    except Exception as exc:  # any driver error on open means the store is not usable
        return StoreVerdict(False, [f"cannot open store {url}: {str(exc).splitlines()[0]}"],
                            from_foreign(exc, f"--db {url}"))
    # SQLite's own check runs in C without holding the GIL, the chains' re-hash in
    # Python: started first in a thread of its own, it runs beside the re-hash on a
    # second core and adds next to nothing to the full check, of which, run in turn, it
    # was a large part (docs/performance.md, "Why the code is shaped this way").
    pool = ThreadPoolExecutor(1, thread_name_prefix="integrity_check") if full else None
    sqlite_check = pool.submit(sqlite_integrity_problem, store) if pool else None
    try:
        lines: list[str] = []
        identities = [identity_hash] if identity_hash else store.identities()
        ok, reports, tiers = True, [], []
        for ident in identities:
            partition = store.partition(ident)
            report = verify_chain(partition) if full else boot_check(partition, sample, record)
            reports.append(report.describe())
            ok = ok and report.ok
            if report.ok:  # the chain attests the run whose digest the tier is held to
                tier = check_tier(partition)
                tiers.append(tier)
                reports.append(tier.describe())
                ok = ok and tier.ok
        if sqlite_check is not None:
            problem = sqlite_check.result()
            if problem:
                return StoreVerdict(False, [problem])
            if store.engine.dialect.name == "sqlite":
                lines.append("SQLite integrity_check: ok")
        return StoreVerdict(ok, lines + reports, tiers=tiers)
    except SQLAlchemyError as exc:
        problem = _finished(sqlite_check)
        if problem:  # what SQLite itself found says more than the read that failed
            return StoreVerdict(False, [problem])
        return StoreVerdict(False, [f"store unreadable (table events): "
                                    f"{str(exc).splitlines()[0]}"])
    finally:
        if pool is not None:
            pool.shutdown(wait=True)  # the check's connection closes before the store
        store.close()

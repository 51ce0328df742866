"""The memory store (SQLAlchemy 2.x; SQLite by default, PostgreSQL for fleets)."""

from robot_memory.store.episodic import (FactRow, MemoryStore, NewEvent, Partition, StoredEvent,
                                         StoreError)
from robot_memory.store.integrity import (ChainReport, StoreVerdict, boot_check,
                                          check_store, file_problem,
                                          sqlite_integrity_problem, verify_chain)

__all__ = ["ChainReport", "FactRow", "MemoryStore", "NewEvent", "Partition", "StoreError",
           "StoredEvent", "StoreVerdict", "boot_check", "check_store", "file_problem", "sqlite_integrity_problem",
           "verify_chain"]

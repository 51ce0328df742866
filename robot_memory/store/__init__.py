"""The memory store: an identity-partitioned, append-only, hash-chained episodic log plus
the semantic facts derived from it (SQLAlchemy 2.x; SQLite by default, PostgreSQL for
fleets). Everything outside this package imports from here.

Open a store with `MemoryStore(url)` (opening.py: engine, schema, triggers; an older
schema is upgraded by migration.py, version.py reads what the store says it is) and
reach one identity's rows through its `Partition` (partition.py), whose methods come from
log.py (appends, the hash chain, event reads), aggregates.py (`result_aggregates`) and
semantic.py (facts, consolidation states, `commit_pass`). chain_check.py re-hashes a
chain; compacted.py reads what compactions removed (and removes it, for
robot_memory/compaction.py); integrity.py decides whether a whole store can be trusted
(`check_store`).
"""

from robot_memory.store.aggregates import (OutcomeRow, ResultAggregates, ValueBatch,
                                           one_result_aggregates)
from robot_memory.store.chain_check import ChainReport, boot_check, stored_digest, verify_chain
from robot_memory.store.compacted import Compaction, compactions, kept_digest, remove_range
from robot_memory.store.integrity import (StoreVerdict, check_store, file_problem,
                                          sqlite_integrity_problem)
from robot_memory.store.log import NewEvent, StoredEvent, event_digest
from robot_memory.store.migration import MigrationReport
from robot_memory.store.opening import MemoryStore
from robot_memory.store.version import StoreError
from robot_memory.store.partition import Partition
from robot_memory.store.schema import GENESIS_HASH
from robot_memory.store.semantic import (ConcurrentPass, FactRow, FactWrite,
                                         fact_row_from_columns)

__all__ = ["GENESIS_HASH", "ChainReport", "Compaction", "ConcurrentPass", "FactRow", "FactWrite",
           "MemoryStore", "MigrationReport", "NewEvent", "OutcomeRow", "Partition",
           "ResultAggregates", "StoreError",
           "StoreVerdict", "StoredEvent", "ValueBatch", "boot_check", "check_store",
           "compactions", "event_digest", "fact_row_from_columns", "file_problem", "kept_digest",
           "one_result_aggregates",
           "remove_range",
           "sqlite_integrity_problem", "stored_digest", "verify_chain"]

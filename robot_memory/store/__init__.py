"""The memory store: an identity-partitioned, append-only, hash-chained episodic log plus
the semantic facts derived from it (SQLAlchemy 2.x; SQLite by default, PostgreSQL for
fleets). Everything outside this package imports from here.

Open a store with `MemoryStore(url)` (opening.py: engine, schema, triggers; an older
schema is upgraded by migration.py, version.py reads what the store says it is) and
reach one identity's rows through its `Partition` (partition.py), whose methods come from
log.py (appends, the hash chain, event reads), aggregates.py (`result_aggregates`) and
semantic.py (facts, consolidation states, `commit_pass`). chain_check.py re-hashes a
chain; compacted.py reads what compactions removed (and removes it, for
robot_memory/retention/compaction.py); tier_digest.py is the digest of the semantic tier a
consolidation run records and tier_check.py holds the stored tier to it; integrity.py
decides whether a whole store can be trusted (`check_store`).
"""

from robot_memory.store.aggregates import (BucketedParameterCount, OutcomeRow,
                                           ResultAggregates, ValueBatch, one_result_aggregates)
from robot_memory.store.amendments import (AMENDMENT, AMENDMENT_APPLIED, AMENDMENT_DISPOSITIONS,
                                           AMENDMENT_SUPERSEDED, AmendedAttempt)
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
from robot_memory.store.tier_check import TierReport, check_tier, compare_tier
from robot_memory.store.tier_digest import (DIGEST_BITS, FACTS_TABLE, RUN_DIGEST_KEY,
                                            STATES_TABLE, RecordedDigest, TierDigest,
                                            fact_row_hash, fact_rows, newest_run_digest,
                                            state_row_hash, state_rows, stored_tier_digest)

__all__ = ["AMENDMENT", "AMENDMENT_APPLIED", "AMENDMENT_DISPOSITIONS", "AMENDMENT_SUPERSEDED",
           "AmendedAttempt", "BucketedParameterCount",
           "DIGEST_BITS", "FACTS_TABLE", "GENESIS_HASH", "RUN_DIGEST_KEY", "STATES_TABLE",
           "RecordedDigest", "TierDigest", "TierReport", "check_tier", "compare_tier",
           "fact_row_hash", "fact_rows", "newest_run_digest", "state_row_hash", "state_rows",
           "stored_tier_digest", "ChainReport", "Compaction", "ConcurrentPass", "FactRow",
           "FactWrite",
           "MemoryStore", "MigrationReport", "NewEvent", "OutcomeRow", "Partition",
           "ResultAggregates", "StoreError",
           "StoreVerdict", "StoredEvent", "ValueBatch", "boot_check", "check_store",
           "compactions", "event_digest", "fact_row_from_columns", "file_problem", "kept_digest",
           "one_result_aggregates",
           "remove_range",
           "sqlite_integrity_problem", "stored_digest", "verify_chain"]

"""Tables of the memory store. Every row carries its identity: the identity_hash, or
the chain number that `chains` maps to it, so each robot reads and writes only its own
partition."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import (BigInteger, Column, Float, Index, Integer, LargeBinary, MetaData,
                        PrimaryKeyConstraint, String, Table, Text, TypeDecorator,
                        UniqueConstraint, text)

# 2: result_facets and result_values (what the rules group and count by, typed).
# 3: result_rollup and value_rollup (the same, pre-aggregated per block of the chain).
# 4: the rollups clustered by chain block first (see below).
# 5: the result index and its rollups keyed by a chain number (`chains`), not by the
#    64-character identity hash; the events' kind index leaves execution results out;
#    their hashes stored as 32 bytes (Digest), not 64 hex digits.
# 6: request_ids (the acknowledged requests a retry is answered from).
# 7: fleet_segments and fleet_segment_chunks (sealed segments shipped to a fleet store);
#    intent_events (the results and consultations of each planner intent: the lineage);
#    result_attempts, result_amendments, amendment_deltas and amendment_delta_values (an
#    amended attempt counted once, with its final outcome: store/amendments.py).
SCHEMA_VERSION = 7
GENESIS_HASH = "0" * 64

metadata = MetaData()


class Digest(TypeDecorator):
    """A SHA-256 digest: 32 bytes in the store (schema 5; half the 64 hex digits it was),
    64 lower-case hex digits in Python, as the chain hashes them. Statements built from
    these tables convert both ways; the few plain driver statements that write or read
    one convert themselves (store/log.py). A value that is not bytes (hex text written
    by hand, behind the triggers) is given back as it is, so verification names it."""

    impl = LargeBinary
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return bytes.fromhex(value) if isinstance(value, str) else value

    def process_result_value(self, value, dialect):
        return bytes(value).hex() if isinstance(value, (bytes, memoryview)) else value


# Key/value facts about the store itself (schema version).
store_info = Table(
    "store_info", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

# Chain ranges whose rows a compaction is removing, in the transaction that removes them
# (store/compacted.py): the append-only triggers let a DELETE of events through only in
# such a range, and the compaction deletes its permit before it commits.
compaction_permits = Table(
    "compaction_permits", metadata,
    Column("identity_hash", String(64), primary_key=True),
    Column("from_seq", BigInteger, nullable=False),
    Column("until_seq", BigInteger, nullable=False),
)

# The append-only episodic log, one hash chain per identity.
events = Table(
    "events", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("identity_hash", String(64), nullable=False),
    # Position in this identity's chain: 1, 2, 3 ... with no gaps.
    Column("seq", BigInteger, nullable=False),
    Column("kind", String(64), nullable=False),
    # Event time (ROS time of the source, sim time in Gazebo), nanoseconds.
    Column("stamp_ns", BigInteger, nullable=False),
    Column("payload_json", Text, nullable=False),
    Column("prev_hash", Digest, nullable=False),
    Column("event_hash", Digest, nullable=False),
    UniqueConstraint("identity_hash", "seq", name="uq_events_identity_seq"),
)
# Events of one kind, for every kind but execution_result (schema 5): results are most of
# the log, and result_facets indexes them by chain position already (with their 64-
# character identity hash, this index took a good part of the store: docs/performance.md,
# "Why the code is shaped this way"). A query uses it only when its WHERE repeats the
# index's own term (OTHER_THAN_RESULTS, store/log.py): SQLite matches a partial index's
# condition term by term, it does not infer it from `kind = ?`.
OTHER_THAN_RESULTS = "kind <> 'execution_result'"
Index("ix_events_identity_kind_seq_other", events.c.identity_hash, events.c.kind, events.c.seq,
      sqlite_where=text(OTHER_THAN_RESULTS), postgresql_where=text(OTHER_THAN_RESULTS))

# A small number per identity's chain (schema 5), which the result index and its rollups
# carry instead of the identity hash: they hold several rows per result, and 64
# characters in each row and index entry were much of what the store kept per result
# (docs/performance.md, "Why the code is shaped this way"). Rows are only ever added (the
# first append of an identity adds its row).
chains = Table(
    "chains", metadata,
    Column("chain_id", Integer, primary_key=True, autoincrement=True),
    Column("identity_hash", String(64), nullable=False, unique=True),
)

# Newest link of each chain; its row lock serialises appends to one identity.
chain_heads = Table(
    "chain_heads", metadata,
    Column("identity_hash", String(64), primary_key=True),
    Column("seq", BigInteger, nullable=False),
    Column("event_hash", String(64), nullable=False),
)

# Consolidated knowledge (the fact record of the paper "Episodic-to-Semantic
# Consolidation Without Identity Drift", section 3.2.1, plus the columns planners filter on).
semantic_facts = Table(
    "semantic_facts", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("identity_hash", String(64), nullable=False),
    Column("fact_kind", String(64), nullable=False),
    Column("fact_key", Text, nullable=False),
    Column("fact_value_json", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("confidence", Float, nullable=False),
    Column("n_observations", BigInteger, nullable=False),
    Column("rule_version", String(32), nullable=False),
    Column("last_supporting_event_id", BigInteger, nullable=False),
    # Event time of the newest supporting event, ns (not wall clock: keeps replay exact).
    Column("last_updated_ns", BigInteger, nullable=False),
    UniqueConstraint("identity_hash", "fact_kind", "fact_key", name="uq_facts_key"),
)

# Mergeable per-key aggregation state, so a pass only reads new events.
consolidation_state = Table(
    "consolidation_state", metadata,
    Column("identity_hash", String(64), primary_key=True),
    Column("fact_kind", String(64), primary_key=True),
    Column("fact_key", Text, primary_key=True),
    Column("state_json", Text, nullable=False),
)

# The newest event of each chain that a verification re-hashed and found intact, so
# the boot check only re-hashes what came after it (plus a rotating sample before it).
# Not part of the log: losing it only makes the next boot check slower.
verified_checkpoints = Table(
    "verified_checkpoints", metadata,
    Column("identity_hash", String(64), primary_key=True),
    Column("seq", BigInteger, nullable=False),
    Column("event_id", BigInteger, nullable=False),
    Column("event_hash", String(64), nullable=False),
    # Where the next boot's sample of older history starts (chain position).
    Column("sample_from_seq", BigInteger, nullable=False),
)

# What the consolidation rules group and count by (schema 2), derived from the canonical
# payload when an execution_result is appended (a v1 store is back-filled by the
# migration). The payload alone is hashed: these rows are an index, not history.
#
# Each distinct combination of the typed columns an identity's results take is one
# row here; invalid_reason is set (the rest empty) for a payload the rules cannot read.
result_combos = Table(
    "result_combos", metadata,
    Column("combo_id", Integer, primary_key=True, autoincrement=True),
    Column("identity_hash", String(64), nullable=False),
    Column("skill_id", Text, nullable=False),
    Column("target_class", Text, nullable=False),
    Column("environment", Text, nullable=False),
    Column("zone", Text, nullable=False),
    Column("success", Integer, nullable=False),
    Column("failure_reason", Text, nullable=False),
    Column("has_observations", Integer, nullable=False),
    Column("invalid_reason", Text, nullable=False),  # '' when the record is readable
)
Index("ix_result_combos_identity", result_combos.c.identity_hash)

# One row per execution_result: its chain position, event time and combination, so a
# pass groups by (combo_id, time bucket): two integers, not six strings.
result_facets = Table(
    "result_facets", metadata,
    Column("event_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=False),
    Column("chain_id", Integer, nullable=False),  # chains.chain_id of the result's identity
    Column("seq", BigInteger, nullable=False),
    Column("stamp_ns", BigInteger, nullable=False),
    Column("combo_id", Integer, nullable=False),
)
Index("ix_result_facets_chain_seq", result_facets.c.chain_id, result_facets.c.seq)

# Parameters (source 0) and observations (source 1), one row per name, with the
# result's combination and stamp so a pass aggregates them without a join. The value is
# kept as repr(float): the exact key of the rules' multisets (a REAL column would merge
# 0.0 and -0.0, which the multisets keep apart). Event ids grow with seq within a
# chain (appends to a chain are serialised), so a chain range is an event-id range.
# Clustered by event (WITHOUT ROWID; schema 5): a range's rows are read and removed in
# key order, with no rowid and no second index beside them.
result_values = Table(
    "result_values", metadata,
    Column("event_id", BigInteger().with_variant(Integer, "sqlite"), nullable=False),
    # Every row carries its chain: row-level security on a fleet store keys on it.
    Column("chain_id", Integer, nullable=False),
    Column("combo_id", Integer, nullable=False),
    Column("stamp_ns", BigInteger, nullable=False),
    Column("source", Integer, nullable=False),
    Column("name", Text, nullable=False),
    Column("value_repr", Text, nullable=False),
    # A result names each parameter and each observation once.
    PrimaryKeyConstraint("event_id", "source", "name", name="result_values_pkey"),
    sqlite_with_rowid=False,
)

# The facets and values again, summed per block of chain positions (block b holds seq
# b*size+1 .. (b+1)*size) and, for outcomes, per event-time bucket (RollupShape, fixed
# when the store is created and kept in store_info), written once by the append that
# fills the block (facets.roll_up_blocks). A pass over a long range reads the blocks it
# covers whole from here (hundreds of rows where the results are 10^5, on a stream of a
# few keys) and only the ends of the range from the rows above.
# Every column is a count, a min or a max: blocks add up to exactly what grouping the
# results themselves gives. Clustered by block first (WITHOUT ROWID; schema 4): a filled
# block's rows go at the end of the table, in a few pages. Clustered by the order the
# pass groups in (schema 3), they went between every older block's rows: an insert into
# a page anywhere in the table each, several times the CPU of appending them and growing
# with the store (docs/performance.md, "Why the code is shaped this way"), where a pass
# that reads many blocks sorts their rows instead.


@dataclass(frozen=True)
class RollupShape:
    """Chain positions per rollup block, and the event-time bucket of result_rollup. A
    pass whose time bucket is a multiple of that bucket reads the rollups; the default
    is the rules' default bucket, an hour."""

    block: int = 4096
    bucket_ns: int = 3600 * 10**9


result_rollup = Table(
    "result_rollup", metadata,
    Column("chain_id", Integer, nullable=False),
    Column("combo_id", Integer, nullable=False),
    Column("bucket", BigInteger, nullable=False),  # stamp_ns // RollupShape.bucket_ns
    Column("seq_block", BigInteger, nullable=False),  # (seq - 1) // RollupShape.block
    Column("n", BigInteger, nullable=False),
    Column("min_event_id", BigInteger, nullable=False),
    Column("max_event_id", BigInteger, nullable=False),
    Column("max_stamp_ns", BigInteger, nullable=False),
    Column("min_seq", BigInteger, nullable=False),
    PrimaryKeyConstraint("chain_id", "seq_block", "combo_id", "bucket",
                         name="result_rollup_pkey"),
    sqlite_with_rowid=False,
)

value_rollup = Table(
    "value_rollup", metadata,
    Column("chain_id", Integer, nullable=False),
    Column("combo_id", Integer, nullable=False),
    Column("source", Integer, nullable=False),
    Column("name", Text, nullable=False),
    Column("value_repr", Text, nullable=False),
    Column("seq_block", BigInteger, nullable=False),
    Column("n", BigInteger, nullable=False),
    Column("max_event_id", BigInteger, nullable=False),
    Column("max_stamp_ns", BigInteger, nullable=False),
    PrimaryKeyConstraint("chain_id", "seq_block", "combo_id", "source", "name",
                         "value_repr", name="value_rollup_pkey"),
    sqlite_with_rowid=False,
)

# The request ids of acknowledged writes (`record_event`'s request_id; schema 6): a retry
# with the same id is answered with the event its first commit stored, not stored again,
# also after a restart. Written in the transaction that appends the event; a row lives as
# long as its event (a compaction that removes the event removes it too), so the table
# never holds more rows than the live log holds results. result_digest (SHA-256 of the
# result as the request gave it) tells a retry from another result under a reused id.
REQUEST_ID_MAX_LENGTH = 128
request_ids = Table(
    "request_ids", metadata,
    Column("identity_hash", String(64), nullable=False),
    Column("request_id", String(REQUEST_ID_MAX_LENGTH), nullable=False),
    Column("event_id", BigInteger, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("result_digest", Digest, nullable=False),
    PrimaryKeyConstraint("identity_hash", "request_id", name="request_ids_pkey"),
)
# A compaction removes the ids of the events it removes, by event id.
Index("ix_request_ids_identity_event", request_ids.c.identity_hash, request_ids.c.event_id)

# Sealed archive segments shipped to this store as a robot's fleet store (schema 7;
# robot_memory/store/fleet_segments.py, robot_memory/retention/shipping.py): one row per
# upload, its bytes in chunks beside it. Both carry the identity, so row-level security
# lets a robot's role insert and read its own uploads and none of another robot's. An
# upload is one transaction; a row whose chunks do not hash to its sha256 is never taken
# for the segment (the reader re-computes it), so a robot only ever adds rows.
fleet_segments = Table(
    "fleet_segments", metadata,
    Column("upload_id", String(32), primary_key=True),
    Column("identity_hash", String(64), nullable=False),
    Column("segment", Text, nullable=False),  # the file name the compaction event records
    Column("sha256", String(64), nullable=False),  # as the chain's compaction records it
    Column("size_bytes", BigInteger, nullable=False),
    Column("chunks", Integer, nullable=False),
    Column("shipped_at_ns", BigInteger, nullable=False),  # the robot's wall clock
)
Index("ix_fleet_segments_identity_segment", fleet_segments.c.identity_hash,
      fleet_segments.c.segment)

fleet_segment_chunks = Table(
    "fleet_segment_chunks", metadata,
    Column("upload_id", String(32), nullable=False),
    Column("identity_hash", String(64), nullable=False),
    Column("chunk_no", Integer, nullable=False),
    Column("data", LargeBinary, nullable=False),
    PrimaryKeyConstraint("upload_id", "chunk_no", name="fleet_segment_chunks_pkey"),
)

# The events that carry a planner intent (schema 7): the execution results and the
# grounding consultations whose payload names a non-empty intent_id, by chain position,
# written by the append that stores them (a v6 store is back-filled by the migration).
# `robot-memory explain --intent` (grounding/lineage.py) reads an action's lineage from
# here instead of scanning the log. Keyed by chain number, intent, position (WITHOUT
# ROWID): one intent's rows are one range of the key. A row lives as long as its event
# (a compaction that removes the event removes it too).
INTENT_MAX_LENGTH = 256  # execution_result.MAX_TEXT, the intent_id's limit on every path
intent_events = Table(
    "intent_events", metadata,
    Column("chain_id", Integer, nullable=False),
    Column("intent_id", String(INTENT_MAX_LENGTH), nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("event_id", BigInteger, nullable=False),
    PrimaryKeyConstraint("chain_id", "intent_id", "seq", name="intent_events_pkey"),
    sqlite_with_rowid=False,
)

# Amended attempts (schema 7; store/amendments.py, docs/consolidation.md#amendments),
# derived by the append that stores each result naming an attempt (no store of an older
# schema holds one: results name attempts since schema 7). Kept live: a compaction never
# removes the attempts and amendments, so an amendment of an attempt whose event was
# compacted away still finds what it corrects.
ATTEMPT_KEY_MAX_LENGTH = 160  # an attempt_id (128) or "event:" and an event id
# One row per named attempt: what its original counted (its combination's fields, its
# parameters, its stamp, as canonical JSON; '' while only amendments have named it) and
# the amendment whose outcome it counts now (final_event_id 0: the original's own).
result_attempts = Table(
    "result_attempts", metadata,
    Column("chain_id", Integer, nullable=False),
    Column("attempt_key", String(ATTEMPT_KEY_MAX_LENGTH), nullable=False),
    Column("original_event_id", BigInteger, nullable=False),
    Column("original_json", Text, nullable=False),
    Column("final_event_id", BigInteger, nullable=False),
    Column("final_stamp_ns", BigInteger, nullable=False),
    Column("final_hash", String(64), nullable=False),
    Column("final_success", Integer, nullable=False),
    Column("final_reason", Text, nullable=False),
    PrimaryKeyConstraint("chain_id", "attempt_key", name="result_attempts_pkey"),
)
Index("ix_result_attempts_original", result_attempts.c.chain_id,
      result_attempts.c.original_event_id)
# One row per amendment: the attempt it names, its rank (stamp, then the hash of its
# stamp and payload: the latest wins), the outcome and the fields that must match the
# attempt's, and what became of it (AMENDMENT_DISPOSITIONS), by chain position.
result_amendments = Table(
    "result_amendments", metadata,
    Column("chain_id", Integer, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("event_id", BigInteger, nullable=False),
    Column("attempt_key", String(ATTEMPT_KEY_MAX_LENGTH), nullable=False),
    Column("stamp_ns", BigInteger, nullable=False),
    Column("rank_hash", String(64), nullable=False),
    Column("success", Integer, nullable=False),
    Column("failure_reason", Text, nullable=False),
    Column("skill_id", Text, nullable=False),
    Column("target_class", Text, nullable=False),
    Column("environment", Text, nullable=False),
    Column("zone", Text, nullable=False),
    Column("disposition", String(32), nullable=False),
    PrimaryKeyConstraint("chain_id", "seq", name="result_amendments_pkey"),
)
Index("ix_result_amendments_attempt", result_amendments.c.chain_id,
      result_amendments.c.attempt_key)
# What an amendment changes in the counts, as signed rows a pass adds to the result
# rows of its range: -1 of the outcome the attempt counted, +1 of its new one, under the
# original's combination (its other fields), time bucket and parameters. Written by the
# append that decides it (seq, event_id: that event; at_stamp_ns its stamp, for a cut in
# event time); the newest-support columns of the result rows have no counterpart here:
# an amendment moves a count, it adds no support. Removed with their range by a
# compaction, as the result rows are.
amendment_deltas = Table(
    "amendment_deltas", metadata,
    Column("chain_id", Integer, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("combo_id", Integer, nullable=False),
    Column("event_id", BigInteger, nullable=False),
    Column("at_stamp_ns", BigInteger, nullable=False),
    Column("original_seq", BigInteger, nullable=False),  # the original's position
    Column("stamp_ns", BigInteger, nullable=False),  # the original's
    Column("n", Integer, nullable=False),
    PrimaryKeyConstraint("chain_id", "seq", "combo_id", name="amendment_deltas_pkey"),
    sqlite_with_rowid=False,
)
amendment_delta_values = Table(
    "amendment_delta_values", metadata,
    Column("chain_id", Integer, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("combo_id", Integer, nullable=False),
    Column("name", Text, nullable=False),
    Column("value_repr", Text, nullable=False),
    Column("event_id", BigInteger, nullable=False),
    Column("at_stamp_ns", BigInteger, nullable=False),
    Column("original_seq", BigInteger, nullable=False),  # the original's position
    Column("stamp_ns", BigInteger, nullable=False),  # the original's
    Column("n", Integer, nullable=False),
    PrimaryKeyConstraint("chain_id", "seq", "combo_id", "name",
                         name="amendment_delta_values_pkey"),
    sqlite_with_rowid=False,
)

PARAMETER, OBSERVATION = 0, 1
COMBO_FIELDS = ("skill_id", "target_class", "environment", "zone", "success",
                "failure_reason", "has_observations", "invalid_reason")

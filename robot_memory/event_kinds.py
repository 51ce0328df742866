"""The kinds of event in the episodic log (the `kind` column), in one place."""

EXECUTION_RESULT = "execution_result"  # a skill attempt (from a result topic or ingest)
CONSOLIDATION_RUN = "consolidation_run"  # a pass: range processed, facts touched, skips
KNOWLEDGE_CONFLICT = "knowledge_conflict"  # a fact became contested
KNOWLEDGE_CONFLICT_RESOLVED = "knowledge_conflict_resolved"  # ... and agreed again
FACT_CONSULTATION = "fact_consultation"  # a grounding answer: requester, intent, facts
IDENTITY_VERIFICATION = "identity_verification"  # the verifier's boot check passed
PRIVACY_REJECTION = "privacy_rejection"  # a refused result: field and category, no value
OVERRIDE = "override"  # a human correction: operator fact, invalidate, freeze, reset
IMPORT = "import"  # a rosbag2 import: the bag's content hash, selection and counts
SCHEMA_MIGRATION = "schema_migration"  # the store's schema was upgraded (columns added)
COMPACTION = "compaction"  # a range archived to a segment file and removed from the store
SEGMENT_FORGOTTEN = "segment_forgotten"  # an archive segment deleted on purpose (forgetting)
SEGMENT_SHIPPED = "segment_shipped"  # a sealed segment confirmed in the fleet store (a receipt)

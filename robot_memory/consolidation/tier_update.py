"""The tier digest a pass leaves (store/tier_digest.py): the digest its checkpoint
recorded, less the rows the pass replaces, plus the rows it writes. Only the rows the pass
touches are hashed; the rest of the tier is not read.

Where the pass starts from:
- before any pass, and after a reset (the pass drops the tier first): an empty tier;
- a run that recorded a digest: that digest;
- a run written before tier digests: the stored tier, read and hashed whole, once (the
  first pass after an upgrade attests the tier as it finds it).
"""

from __future__ import annotations

from sqlalchemy import Connection

from robot_memory.consolidation.checkpoint import Checkpoint
from robot_memory.errors import ConsolidationError
from robot_memory.store import (FactRow, TierDigest, fact_row_hash, state_row_hash,
                                stored_tier_digest)


def digest_before(identity_hash: str, checkpoint: Checkpoint, reset_pending: bool,
                  conn: Connection) -> TierDigest:
    """The digest of the tier the pass builds on, read in the pass's snapshot."""
    if reset_pending or checkpoint.run_seq == 0:
        return TierDigest()
    if checkpoint.digest is None:
        return stored_tier_digest(identity_hash, conn)
    try:
        return TierDigest.of_payload(checkpoint.digest)
    except ValueError:
        raise ConsolidationError(
            f"the tier digest of the newest consolidation run (events.id "
            f"{checkpoint.run_event_id}) is unreadable: run `robot-memory verify`") from None


def stored_states_sum(identity_hash: str, kind: str, texts: dict[str, str]) -> int:
    """The hashes, summed, of stored states a pass reads (and will rewrite)."""
    return sum(state_row_hash(identity_hash, kind, key, text) for key, text in texts.items())


def old_fact_hash(identity_hash: str, old: FactRow) -> int:
    return fact_row_hash(identity_hash, old.kind, old.key, old.value_json, old.status,
                         old.confidence, old.n_observations, old.rule_version,
                         old.last_supporting_event_id, old.last_updated_ns)


def digest_after(identity_hash: str, before: TierDigest, replaced_states_sum: int,
                 states, changes) -> TierDigest:
    """The digest once the pass's states ((kind, key, state_json, already stored), all
    of whose stored versions summed to `replaced_states_sum`) and fact changes are
    written."""
    digest = before.copy()
    digest.state_sum -= replaced_states_sum
    for kind, key, state_json, stored in states:
        digest.state_sum += state_row_hash(identity_hash, kind, key, state_json)
        if not stored:
            digest.state_rows += 1
    for change in changes:
        if change.old is None:
            digest.fact_rows += 1
        else:
            digest.fact_sum -= old_fact_hash(identity_hash, change.old)
        new = change.new
        digest.fact_sum += fact_row_hash(identity_hash, change.kind, change.key,
                                         change.value_json, new.status, new.confidence,
                                         new.n_observations, new.rule_version,
                                         new.last_supporting_event_id, new.last_updated_ns)
    return digest

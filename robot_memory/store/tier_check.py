"""Checking the served tier at boot: do the stored facts and states hash to the digest the
newest consolidation run recorded (store/tier_digest.py)?

Run after the chain checks (store/integrity.py), which attest the run event itself. A
difference means rows of `semantic_facts` or `consolidation_state` were edited, deleted or
inserted other than by a pass: the report names the table; which row, the aggregate
cannot say (`robot-memory verify` finds it, robot_memory/consolidation/tier_audit.py).
A run written before tier digests has none to compare with: the tier is then reported
as not attested (not a failure) until the next pass records one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from robot_memory.store.partition import Partition
from robot_memory.store.tier_digest import (FACTS_TABLE, STATES_TABLE, RecordedDigest,
                                            TierDigest, newest_run_digest, stored_tier_digest)


@dataclass(frozen=True)
class TierReport:
    identity_hash: str
    ok: bool
    facts: int = 0  # rows stored
    states: int = 0
    run_seq: int = 0  # the run whose digest was compared (0: none yet)
    run_event_id: int = 0
    attested: bool = True  # False: the newest run recorded no digest
    # The tables that differ from the digest, each with what was found and recorded.
    differing: tuple[tuple[str, int, int], ...] = field(default_factory=tuple)
    problem: str = ""  # a digest that could not be read

    @property
    def table(self) -> str:
        """The first table that differs ('' when none does)."""
        return self.differing[0][0] if self.differing else ""

    def describe(self) -> str:
        who = f"identity {self.identity_hash[:12]}: semantic tier"
        run = f"the newest consolidation run (seq {self.run_seq}, events.id {self.run_event_id})"
        if self.problem:
            return f"{who}: {self.problem}"
        if not self.attested:
            return (f"{who} not attested: {run} predates tier digests; the next pass "
                    f"records one ({self.facts} facts, {self.states} states stored)")
        if self.ok:
            since = f"matches the digest {run} recorded" if self.run_seq else \
                "empty, as expected before any pass"
            return f"{who} {since} ({self.facts} facts, {self.states} states)"
        tables = "; ".join(f"table {table}: {found} rows stored, {recorded} recorded"
                           for table, found, recorded in self.differing)
        return (f"{who} differs from the digest {run} recorded: {tables} (rows edited, "
                "deleted or inserted outside a pass; `robot-memory verify` names the first)")


def compare_tier(identity_hash: str, recorded: RecordedDigest, stored: TierDigest
                 ) -> TierReport:
    """The report of a stored tier's digest against the one a run recorded."""
    base = dict(identity_hash=identity_hash, facts=stored.fact_rows, states=stored.state_rows,
                run_seq=recorded.run_seq, run_event_id=recorded.run_event_id)
    if recorded.digest is None:
        return TierReport(ok=True, attested=False, **base)
    differing = tuple((table, found[0], expected[0]) for table, found, expected in (
        (FACTS_TABLE, stored.facts_part(), recorded.digest.facts_part()),
        (STATES_TABLE, stored.states_part(), recorded.digest.states_part()))
        if found != expected)
    return TierReport(ok=not differing, differing=differing, **base)


def check_tier(partition: Partition) -> TierReport:
    """Recompute the stored tier's digest and compare it with the newest run's, in one
    snapshot."""
    ident = partition.identity_hash
    with partition.store.read() as conn:
        try:
            recorded = newest_run_digest(ident, conn)
        except ValueError:
            return TierReport(ident, False, problem="the digest the newest consolidation run "
                                                    "recorded is unreadable (table events)")
        stored = stored_tier_digest(ident, conn)
    return compare_tier(ident, recorded, stored)

"""Partition: one identity's slice of the store, the handle nodes and commands get.

Code outside this package reaches the data only through a `Partition`, which is bound
to one identity hash: there is no call that reads or writes another identity's rows.
Its methods are those of the store's parts, one module each: the episodic log
(store/log.py), the aggregates the rules read (store/aggregates.py), the semantic
tier (store/semantic.py), the acknowledged requests (store/requests.py), the intent
index (store/intents.py) and the amended attempts (store/amendments.py).
"""

from __future__ import annotations

from robot_memory.store.aggregates import ResultAggregation
from robot_memory.store.amendments import AmendedAttempts
from robot_memory.store.facets import ComboIds
from robot_memory.store.intents import IntentIndex
from robot_memory.store.log import EventLog
from robot_memory.store.requests import AcknowledgedRequests
from robot_memory.store.semantic import SemanticTier


class Partition(EventLog, ResultAggregation, SemanticTier, AcknowledgedRequests, IntentIndex,
                AmendedAttempts):
    """One identity's slice of the store; the only handle nodes and commands get."""

    def __init__(self, store, identity_hash: str):
        # store: the MemoryStore (store/opening.py). Not annotated: opening a store may
        # migrate it, which appends through a Partition, so that module imports this one.
        self.store = store
        self.identity_hash = identity_hash
        self._combos = ComboIds(identity_hash)
        self._chain_number: int | None = None  # chains.chain_id, once seen (EventLog)
        # Where the last append that inserted combinations left the head, until it is
        # seen committed (_forget_if_rolled_back).
        self._combos_added_at: tuple[int, str] | None = None

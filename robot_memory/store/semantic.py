"""The semantic tier of one identity: the facts a consolidation pass derives, the
mergeable state it keeps per fact key, and the pass's commit (`commit_pass`), which
writes both with the pass's events in one transaction.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import Connection, delete, select

from robot_memory.canonical import plain_json_loads
from robot_memory.errors import ConsolidationError
from robot_memory.event_kinds import CONSOLIDATION_RUN
from robot_memory.store.bulk import placeholder
from robot_memory.store.log import NewEvent, StoredEvent
from robot_memory.store.schema import consolidation_state, semantic_facts


class ConcurrentPass(ConsolidationError):
    """Raised when another pass committed for this identity while this one was computing."""


@dataclass(frozen=True, slots=True, init=False)
class FactRow:
    """A fact as the semantic tier stores it: one row of semantic_facts. The one shape
    of a stored fact, for every holder (a pass, the grounding index, the snapshot, the
    command line); made by keyword, or from the stored columns (`fact_row_from_columns`).
    Its value is parsed from value_json on first use: a pass compares the JSON text of
    the facts it touches and never needs most of them as dicts."""

    id: int | None  # None: a fact a pass is about to write, before the store numbers it
    kind: str
    key: str
    value_json: str
    status: str
    confidence: float
    n_observations: int
    rule_version: str
    last_supporting_event_id: int
    last_updated_ns: int
    # The parsed value, once `value` is asked for (not part of the fact: no init, no
    # comparison).
    _parsed: dict[str, Any] | None = field(default=None, init=False, repr=False,
                                           compare=False)

    def __init__(self, id: int | None, kind: str, key: str, value_json: str, status: str,
                 confidence: float, n_observations: int, rule_version: str,
                 last_supporting_event_id: int, last_updated_ns: int) -> None:
        # Each slot set through its own descriptor, in field order. Why not the frozen
        # dataclass's generated __init__: it goes through object.__setattr__ for each
        # field, which is dearer, and a pass reads, and a delta brings, a row per fact it
        # touches (docs/performance.md, "Why the code is shaped this way").
        _set_id(self, id)
        _set_kind(self, kind)
        _set_key(self, key)
        _set_value_json(self, value_json)
        _set_status(self, status)
        _set_confidence(self, confidence)
        _set_n_observations(self, n_observations)
        _set_rule_version(self, rule_version)
        _set_last_supporting_event_id(self, last_supporting_event_id)
        _set_last_updated_ns(self, last_updated_ns)
        _set_parsed(self, None)

    @property
    def value(self) -> dict[str, Any]:
        if self._parsed is None:
            object.__setattr__(self, "_parsed", _parse_fact_value(self.value_json))
        return self._parsed

    def peek_value(self) -> dict[str, Any]:
        """The value for one look, not kept: a holder of 10^4 facts that needs a few of
        each value's fields would otherwise keep every value parsed. Not kept, its keys
        need no interning: parsed in C alone (a pass's delta is read this way twice per
        fact)."""
        return self._parsed if self._parsed is not None else plain_json_loads(self.value_json)

    def as_write(self) -> FactWrite:
        """This fact as a pass writes it: an update of row `id`, or a new row (id None)."""
        return FactWrite(self.id, self.kind, self.key, self.value_json, self.status,
                         self.confidence, self.n_observations, self.rule_version,
                         self.last_supporting_event_id, self.last_updated_ns)


# The slots' setters, in field order (FactRow.__init__).
(_set_id, _set_kind, _set_key, _set_value_json, _set_status, _set_confidence,
 _set_n_observations, _set_rule_version, _set_last_supporting_event_id, _set_last_updated_ns,
 _set_parsed) = [vars(FactRow)[name].__set__ for name in FactRow.__slots__]


def _interned_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {sys.intern(key): value for key, value in pairs}


def _parse_fact_value(value_json: str) -> dict[str, Any]:
    # A fact's value, its keys interned. Why: fact values share a small key vocabulary,
    # and one copy of each key, not one per fact, takes a good part off the memory of the
    # facts a node holds (docs/performance.md, "Why the code is shaped this way").
    return json.loads(value_json, object_pairs_hook=_interned_keys)


def fact_from_row(row) -> FactRow:
    """FactRow of a SQLAlchemy row of semantic_facts (its columns by name)."""
    return FactRow(id=row.id, kind=row.fact_kind, key=row.fact_key,
                   value_json=row.fact_value_json, status=row.status,
                   confidence=row.confidence, n_observations=row.n_observations,
                   rule_version=row.rule_version,
                   last_supporting_event_id=row.last_supporting_event_id,
                   last_updated_ns=row.last_updated_ns)


def fact_row_from_columns(row) -> FactRow:
    """FactRow of its ten stored columns in _FACT_COLUMNS order, which is the order of
    its fields (its value unparsed): a pass reads, and a delta brings, a row per fact it
    touches."""
    return FactRow(*row)


class FactWrite(NamedTuple):
    """The columns of a fact a pass writes (FactRow.as_write): a new row (row_id None) or
    an update of row `row_id`. A tuple: a pass writes thousands, and the columns go to
    the driver as they are."""

    row_id: int | None
    kind: str
    key: str
    fact_value_json: str
    status: str
    confidence: float
    n_observations: int
    rule_version: str
    last_supporting_event_id: int
    last_updated_ns: int


# The columns of a FactWrite after its row id, kind and key, in order.
_FACT_WRITE_COLUMNS = FactWrite._fields[3:]


# FactRow's fields in order.
_FACT_COLUMNS = ("id, fact_kind, fact_key, fact_value_json, status, confidence, n_observations, "
                 "rule_version, last_supporting_event_id, last_updated_ns")


class SemanticTier:
    """The semantic tier's part of a Partition (store/partition.py), which gives it
    `store` and `identity_hash`; a pass's commit appends through the log's part."""

    # -- semantic facts ---------------------------------------------------------------
    def facts_by_key(self, keys: set[tuple[str, str]], conn: Connection) -> list[FactRow]:
        """Only the facts with these (kind, key): a pass compares what it touched, not
        the whole table. (Plain DB-API, as _write_states: SQLAlchemy's expanding IN and
        per-row processing were a noticeable share of an incremental pass.)"""
        found: list[FactRow] = []
        by_kind: dict[str, list[str]] = {}
        for kind, key in keys:
            by_kind.setdefault(kind, []).append(key)
        mark = placeholder(conn)  # below, .all(): one driver fetch, not one per row
        for kind, kind_keys in sorted(by_kind.items()):
            kind_keys.sort()
            for start in range(0, len(kind_keys), 500):  # stay under bind-parameter limits
                chunk = kind_keys[start:start + 500]
                found += [fact_row_from_columns(row) for row in conn.exec_driver_sql(
                    f"SELECT {_FACT_COLUMNS} FROM semantic_facts WHERE identity_hash = {mark}"
                    f" AND fact_kind = {mark} AND fact_key IN ({', '.join([mark] * len(chunk))})",
                    (self.identity_hash, kind, *chunk)).all()]
        return found

    def facts(self, conn: Connection | None = None) -> list[FactRow]:
        query = (select(semantic_facts)
                 .where(semantic_facts.c.identity_hash == self.identity_hash)
                 .order_by(semantic_facts.c.fact_kind, semantic_facts.c.fact_key))
        if conn is None:
            with self.store.read() as own:
                return [fact_from_row(r) for r in own.execute(query)]
        return [fact_from_row(r) for r in conn.execute(query)]

    # -- consolidation state ----------------------------------------------------------
    def consolidation_states(self, kind: str, keys: Iterable[str], conn: Connection
                             ) -> dict[str, str]:
        """Stored state JSON of these keys of one fact kind (the keys that have one)."""
        keys, found = sorted(keys), {}
        mark = placeholder(conn)
        for start in range(0, len(keys), 500):  # stay under bind-parameter limits
            chunk = keys[start:start + 500]
            found.update(conn.exec_driver_sql(
                "SELECT fact_key, state_json FROM consolidation_state WHERE identity_hash = "
                f"{mark} AND fact_kind = {mark} AND fact_key IN "
                f"({', '.join([mark] * len(chunk))})", (self.identity_hash, kind, *chunk)).all())
        return found

    def all_consolidation_states(self, conn: Connection) -> list[tuple[str, str, str]]:
        """(kind, key, state_json) of every state, in key order (for an archive)."""
        return conn.execute(select(consolidation_state.c.fact_kind,
                                   consolidation_state.c.fact_key,
                                   consolidation_state.c.state_json)
                            .where(consolidation_state.c.identity_hash == self.identity_hash)
                            .order_by(consolidation_state.c.fact_kind,
                                      consolidation_state.c.fact_key)).all()

    def commit_pass(self, expect_run_seq: int, reset: bool,
                    states: list[tuple[str, str, str, bool]], facts: list[FactWrite],
                    new_events: list[NewEvent]) -> list[StoredEvent]:
        """A pass's whole result in ONE transaction: after a reset the derived tier is
        dropped, then the states (kind, key, state_json, already stored), the facts and
        the events (conflicts and the run) are written. Raises ConcurrentPass if a pass
        committed since the one this pass built on (seq expect_run_seq)."""
        with self.store.write() as conn:
            if self._latest_seq(CONSOLIDATION_RUN, conn) != expect_run_seq:
                raise ConcurrentPass("another consolidation pass committed first; retry")
            if reset:  # archived and logged by the override: derived rows only
                for table in (semantic_facts, consolidation_state):
                    conn.execute(delete(table).where(
                        table.c.identity_hash == self.identity_hash))
            self._write_states(conn, states)
            self._write_facts(conn, facts)
            return self.append_in(conn, new_events)

    # Thousands of rows per pass: plain DB-API executemany, without per-row SQLAlchemy
    # parameter processing (a large share of a big pass's time otherwise:
    # docs/performance.md, "Why the code is shaped this way").
    def _write_states(self, conn: Connection, states: list[tuple[str, str, str, bool]]) -> None:
        mark = placeholder(conn)
        ident = self.identity_hash
        new_rows = [(ident, kind, key, state) for kind, key, state, stored in states
                    if not stored]
        if new_rows:
            conn.exec_driver_sql(
                "INSERT INTO consolidation_state (identity_hash, fact_kind, fact_key, "
                f"state_json) VALUES ({mark}, {mark}, {mark}, {mark})", new_rows)
        changed = [(state, ident, kind, key) for kind, key, state, stored in states if stored]
        if changed:
            conn.exec_driver_sql(
                f"UPDATE consolidation_state SET state_json = {mark} WHERE identity_hash = "
                f"{mark} AND fact_kind = {mark} AND fact_key = {mark}", changed)

    def _write_facts(self, conn: Connection, facts: list[FactWrite]) -> None:
        if not facts:
            return
        mark = placeholder(conn)
        ident = self.identity_hash
        new_rows = [(ident, *f[1:]) for f in facts if f.row_id is None]
        if new_rows:
            names = ", ".join(["identity_hash", "fact_kind", "fact_key", *_FACT_WRITE_COLUMNS])
            marks = ", ".join([mark] * (3 + len(_FACT_WRITE_COLUMNS)))
            conn.exec_driver_sql(f"INSERT INTO semantic_facts ({names}) VALUES ({marks})",
                                 new_rows)
        updates = [(*f[3:], f.row_id) for f in facts if f.row_id is not None]
        if updates:
            assignments = ", ".join(f"{c} = {mark}" for c in _FACT_WRITE_COLUMNS)
            conn.exec_driver_sql(f"UPDATE semantic_facts SET {assignments} WHERE id = {mark}",
                                 updates)

"""Facets of an execution result: the typed columns the consolidation rules group and
count by, derived from the canonical payload when the event is appended (or by the
schema-2 migration), so that no pass decodes JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from itertools import repeat
from operator import itemgetter

from sqlalchemy import Connection, select, text

from robot_memory.execution_result import InvalidRecord, stored_fields
from robot_memory.store.amendments import AMENDMENT, is_amendment
from robot_memory.store.bulk import insert_rows, placeholder
from robot_memory.store.schema import (COMBO_FIELDS, OBSERVATION, PARAMETER, RollupShape,
                                       result_combos, result_facets, result_values)

Combo = tuple  # the COMBO_FIELDS values of one result


def facets_of(payload_json: str, stamp_ns: int) -> tuple[Combo, list[tuple[int, str, str]]]:
    """(combination, [(source, name, value_repr)]) of one stored execution_result,
    decoded from the stored canonical bytes exactly as a pass over payloads reads them."""
    return facets_of_payload(json.loads(payload_json), stamp_ns)


def facets_of_payload(payload: dict, stamp_ns: int) -> tuple[Combo, list[tuple[int, str, str]]]:
    """`facets_of` for a payload already decoded from the stored canonical bytes."""
    try:
        fields = stored_fields(payload)
    except InvalidRecord as exc:
        return ("", "", "", "", 0, "", 0, exc.reason), []
    facets = _facets(fields.skill_id, fields.target_class, fields.environment, fields.zone,
                     fields.success, fields.failure_reason, fields.parameters,
                     fields.observations)
    return _as_amendment(facets) if is_amendment(payload) else facets


def _as_amendment(facets: tuple[Combo, list]) -> tuple[Combo, list]:
    """An amendment's facets: its combination marked AMENDMENT (no rule counts it as an
    attempt: what it changes is written apart, store/amendments.py), no values."""
    return (*facets[0][:7], AMENDMENT), []


# The fields facets are made of, read from a payload in one call.
_FACET_FIELDS = itemgetter("skill_id", "target_class", "environment", "zone", "success",
                           "failure_reason", "parameters", "observations")


def facets_of_checked(payload: dict) -> tuple[Combo, list[tuple[int, str, str]]]:
    """`facets_of_payload` of a validated ExecutionRecord's payload() (every field
    present, of its type, the values finite floats), read without checking it again: the
    logger appends a thousand a second."""
    facets = _facets(*_FACET_FIELDS(payload))
    return _as_amendment(facets) if "amends" in payload and payload["amends"] else facets


def _facets(skill_id, target_class, environment, zone, success, failure_reason,
            parameters: dict, observations: dict) -> tuple[Combo, list[tuple[int, str, str]]]:
    combo = (skill_id, target_class, environment, zone, int(success), failure_reason,
             int(bool(observations)), "")
    values = [(PARAMETER, name, repr(float(v))) for name, v in parameters.items()]
    values += [(OBSERVATION, name, repr(float(v))) for name, v in observations.items()]
    return combo, values


class ComboIds:
    """combination -> combo_id of one identity. Rows are only ever added, and only by a
    writer holding the chain's lock, so a cached id stays right once its row is
    committed (the ids it inserted itself are cached before: Partition drops them if
    that transaction was rolled back)."""

    def __init__(self, identity_hash: str):
        self.identity_hash = identity_hash
        self.ids: dict[Combo, int] = {}
        self.inserted = 0  # rows this cache inserted (and cached the ids of)
        self._newest = 0  # the greatest combo_id read so far
        # combo_id -> combination as committed rows show it (read by passes): grown by
        # the rows past the newest id seen, not reloaded whole on every pass.
        self._committed: dict[int, Combo] = {}
        self._committed_upto = 0

    def committed(self, conn: Connection) -> dict[int, Combo]:
        """combo_id -> combination, all of this identity's that `conn`'s snapshot sees
        (call it in a read transaction only: what it caches must be committed). One
        identity's combos are inserted under its chain lock, so a combo committed later
        has a greater id than any seen before: the new ones are those past the newest."""
        rows = conn.execute(select(result_combos.c.combo_id,
                                   *[result_combos.c[name] for name in COMBO_FIELDS])
                            .where(result_combos.c.identity_hash == self.identity_hash,
                                   result_combos.c.combo_id > self._committed_upto)).all()
        for row in rows:
            # Interned: 10^4 combinations share a few skills, environments and reasons.
            self._committed[row[0]] = tuple(sys.intern(v) if type(v) is str else v
                                            for v in row[1:])
        if rows:
            self._committed_upto = max(self._committed_upto, max(row[0] for row in rows))
        return self._committed

    def referenced(self, conn: Connection, facets_where: str, params: Sequence
                   ) -> dict[int, Combo]:
        """combo_id -> combination of the combos that the result_facets rows matching
        `facets_where` (written with the driver's parameter marks, filled by `params`)
        use: for a short range, when nothing is cached yet (a pass over 10^3 results
        needs 10^3 combos, not the 10^4 a store has)."""
        mark = placeholder(conn)
        rows = conn.exec_driver_sql(
            f"SELECT {', '.join(('combo_id',) + COMBO_FIELDS)} FROM result_combos "
            f"WHERE identity_hash = {mark} AND combo_id IN "
            f"(SELECT combo_id FROM result_facets WHERE {facets_where})",
            (self.identity_hash, *params)).all()
        return {row[0]: tuple(row[1:]) for row in rows}

    def for_short_range(self, conn: Connection, facets_where: str, params: Sequence
                        ) -> dict[int, Combo]:
        """The combinations a pass over a short range needs (read transactions only):
        those it uses, or all of them once they are cached anyway."""
        if not self._committed_upto:
            return self.referenced(conn, facets_where, params)
        return self.committed(conn)

    def ids_of(self, conn: Connection, combos: set[Combo]) -> dict[Combo, int]:
        """Ids of these combinations, inserting the new ones (the caller holds the chain's
        lock). One identity's combos are only inserted under that lock, so whatever another
        process added since we last looked has ids past the newest we know: only those rows
        are read, not all of them again."""
        # Not `combos - self.ids.keys()`: that copies all 10^4 known keys into a set on
        # every batch (a tenth of the logger's CPU at 1000 results/s).
        ids = self.ids
        missing = {combo for combo in combos if combo not in ids}
        if not missing:
            return self.ids
        self._rows_after(conn, self._newest)
        missing = {combo for combo in missing if combo not in ids}
        if missing:
            insert_rows(conn, result_combos, _COMBO_COLUMNS,
                        [(*combo, self.identity_hash) for combo in sorted(missing)])
            self.inserted += len(missing)
            self._rows_after(conn, self._newest)
        return self.ids

    def _rows_after(self, conn: Connection, newest: int) -> dict[int, Combo]:
        mark = placeholder(conn)
        rows = conn.exec_driver_sql(
            f"SELECT combo_id, {', '.join(COMBO_FIELDS)} FROM result_combos "
            f"WHERE identity_hash = {mark} AND combo_id > {mark} ORDER BY combo_id",
            (self.identity_hash, newest)).all()
        by_id = {row[0]: tuple(row[1:]) for row in rows}
        self.ids.update({combo: combo_id for combo_id, combo in by_id.items()})
        if by_id:
            self._newest = max(self._newest, max(by_id))
        return by_id


_COMBO_COLUMNS = (*COMBO_FIELDS, "identity_hash")


def insert_facets(conn: Connection, chain: int, results: list[tuple[int, int, int, str | dict]],
                  combo_ids: ComboIds, checked: Sequence[bool] = ()) -> int:
    """Index (event id, seq, stamp_ns, payload_json) execution results of one identity,
    whose chain number is `chain` (the payload may be given decoded from that JSON
    already); returns how many.
    checked[i]: results[i]'s payload is a validated record's (facets_of_checked)."""
    if not results:
        return 0
    decoded = []  # ((event_id, seq, stamp_ns), (combo, values)) per result
    for (event_id, seq, stamp_ns, payload), is_checked in zip(results,
                                                              checked or repeat(False)):
        decoded.append(((event_id, seq, stamp_ns),
                        facets_of_checked(payload) if is_checked
                        else facets_of(payload, stamp_ns) if isinstance(payload, str)
                        else facets_of_payload(payload, stamp_ns)))
    ids = combo_ids.ids_of(conn, {combo for _, (combo, _) in decoded})
    facets, values = [], []
    for (event_id, seq, stamp_ns), (combo, named) in decoded:
        combo_id = ids[combo]
        facets.append((event_id, chain, seq, stamp_ns, combo_id))
        values += [(event_id, chain, combo_id, stamp_ns, source, name, value)
                   for source, name, value in named]
    insert_rows(conn, result_facets, _FACET_COLUMNS, facets)
    insert_rows(conn, result_values, _VALUE_COLUMNS, values)
    return len(facets)


def roll_up_blocks(conn: Connection, chain: int, rollup: RollupShape,
                   first_block: int, end_block: int) -> None:
    """Sum the result rows of blocks [first_block, end_block) into the rollups. Call it
    once per block, when the append that fills its last chain position has written its
    rows (in that transaction): a block's rows never change after that. Two statements
    for the range, run by the database: about 20 ms of CPU a block of 4,096 on SQLite
    (some 5 µs a result, a sixth of appending it)."""
    if first_block >= end_block:
        return
    size = int(rollup.block)
    binds = {"chain": chain, "lo": first_block * size, "hi": end_block * size}
    # A plain INSERT: summing a block a second time fails here, on the rows it has.
    conn.execute(text(
        "INSERT INTO result_rollup (chain_id, combo_id, bucket, seq_block, n, "
        "min_event_id, max_event_id, max_stamp_ns, min_seq) "
        f"SELECT chain_id, combo_id, {floor_div_sql('stamp_ns', rollup.bucket_ns)}, "
        f"(seq - 1) / {size}, count(*), min(event_id), max(event_id), max(stamp_ns), min(seq) "
        "FROM result_facets WHERE chain_id = :chain AND seq > :lo AND seq <= :hi "
        "GROUP BY 1, 2, 3, 4"), binds)
    # A block's values are those of its results (joined by event id: the values carry
    # no chain position). Nearly every value of a block is a group of its own, and
    # grouping them costs SQLite a sort as dear as the rest of the append's statements:
    # there each value is inserted, and one whose group is there already counted into
    # it (the block's rows only: the statement above refused a block summed before).
    # PostgreSQL cannot update a row twice in one statement (and its runtime role may
    # only insert here): it groups.
    if conn.dialect.name == "sqlite":
        conn.execute(text(
            f"{_VALUE_ROLLUP_INSERT} SELECT v.chain_id, v.combo_id, v.source, v.name, "
            f"v.value_repr, (f.seq - 1) / {size}, 1, v.event_id, v.stamp_ns "
            f"{_VALUES_OF_BLOCKS} ON CONFLICT (chain_id, seq_block, combo_id, source, name, "
            "value_repr) DO UPDATE SET n = n + 1, "
            "max_event_id = max(max_event_id, excluded.max_event_id), "
            "max_stamp_ns = max(max_stamp_ns, excluded.max_stamp_ns)"), binds)
        return
    conn.execute(text(
        f"{_VALUE_ROLLUP_INSERT} SELECT v.chain_id, v.combo_id, v.source, v.name, "
        f"v.value_repr, (f.seq - 1) / {size}, count(*), max(v.event_id), max(v.stamp_ns) "
        f"{_VALUES_OF_BLOCKS} GROUP BY 1, 2, 3, 4, 5, 6"), binds)


_VALUE_ROLLUP_INSERT = ("INSERT INTO value_rollup (chain_id, combo_id, source, name, "
                        "value_repr, seq_block, n, max_event_id, max_stamp_ns)")
_VALUES_OF_BLOCKS = ("FROM result_facets f JOIN result_values v ON v.event_id = f.event_id "
                     "WHERE f.chain_id = :chain AND f.seq > :lo AND f.seq <= :hi")


def floor_div_sql(column: str, width: int) -> str:
    """Floor division of an integer column by width, as Python's // (SQL truncates)."""
    w = int(width)
    if w == 1:
        return column
    return f"CASE WHEN {column} >= 0 THEN {column} / {w} ELSE -(({w - 1} - {column}) / {w}) END"


_FACET_COLUMNS = ("event_id", "chain_id", "seq", "stamp_ns", "combo_id")
_VALUE_COLUMNS = ("event_id", "chain_id", "combo_id", "stamp_ns", "source", "name",
                  "value_repr")

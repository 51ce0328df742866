"""Facets of an execution result: the typed columns the consolidation rules group and
count by, derived from the canonical payload when the event is appended (or by the
schema-2 migration), so that no pass decodes JSON."""

from __future__ import annotations

import functools
import json
import math

from sqlalchemy import Connection, select, text

from robot_memory.records import InvalidRecord, record_from_payload
from robot_memory.store.bulk import insert_rows
from robot_memory.store.schema import (COMBO_FIELDS, OBSERVATION, PARAMETER, RollupShape,
                                       result_combos, result_facets, result_values)

Combo = tuple  # the COMBO_FIELDS values of one result


def facets_of(payload_json: str, stamp_ns: int) -> tuple[Combo, list[tuple[int, str, str]]]:
    """(combination, [(source, name, value_repr)]) of one stored execution_result,
    decoded from the stored canonical bytes exactly as a pass over payloads reads them."""
    return facets_of_payload(json.loads(payload_json), stamp_ns)


def facets_of_payload(payload: dict, stamp_ns: int) -> tuple[Combo, list[tuple[int, str, str]]]:
    """`facets_of` for a payload already decoded from the stored canonical bytes."""
    get = payload.get
    skill_id, success = get("skill_id"), get("success")
    texts = [get(name, "") for name in _TEXT_FIELDS]
    parameters, observations = get("parameters", {}), get("observations", {})
    # Every appended result, read without building a record (the same checks as
    # record_from_payload, which decides whatever does not pass them).
    if (type(skill_id) is str and skill_id and type(success) is bool
            and all(type(text) is str for text in texts)
            and type(parameters) is dict and type(observations) is dict
            and _finite_numbers(parameters) and _finite_numbers(observations)):
        target_class, environment, zone, failure_reason = texts[:4]
    else:
        try:
            record = record_from_payload(payload, stamp_ns)
        except InvalidRecord as exc:
            return ("", "", "", "", 0, "", 0, exc.reason), []
        skill_id, success, parameters, observations = (record.skill_id, record.success,
                                                       record.parameters, record.observations)
        target_class, environment, zone, failure_reason = (
            record.target_class, record.environment, record.zone, record.failure_reason)
    combo = (skill_id, target_class, environment, zone, int(success), failure_reason,
             int(bool(observations)), "")
    values = [(PARAMETER, name, repr(float(v))) for name, v in parameters.items()]
    values += [(OBSERVATION, name, repr(float(v))) for name, v in observations.items()]
    return combo, values


_TEXT_FIELDS = ("target_class", "environment", "zone", "failure_reason", "intent_id", "notes")
_NUMBER_TYPES = (float, int)


def _finite_numbers(values: dict) -> bool:
    return all(type(v) in _NUMBER_TYPES and math.isfinite(v) for v in values.values())


class ComboIds:
    """combination -> combo_id of one identity. Rows are only ever added, and only by a
    writer holding the chain's lock, so a cached id stays right."""

    def __init__(self, identity_hash: str):
        self.identity_hash = identity_hash
        self.ids: dict[Combo, int] = {}
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
            self._committed[row[0]] = tuple(row[1:])
        if rows:
            self._committed_upto = max(self._committed_upto, max(row[0] for row in rows))
        return self._committed

    def referenced(self, conn: Connection, facets_where: str, binds: dict) -> dict[int, Combo]:
        """combo_id -> combination of the combos that the result_facets rows matching
        `facets_where` use: for a short range, when nothing is cached yet (a pass over
        10^3 results needs 10^3 combos, not the 10^4 a store has)."""
        rows = conn.execute(text(
            f"SELECT {', '.join(('combo_id',) + COMBO_FIELDS)} FROM result_combos "
            "WHERE identity_hash = :ident AND combo_id IN "
            f"(SELECT combo_id FROM result_facets WHERE {facets_where})"),
            {**binds, "ident": self.identity_hash}).all()
        return {row[0]: tuple(row[1:]) for row in rows}

    def for_range(self, conn: Connection, facets_where: str, binds: dict,
                  short: bool) -> dict[int, Combo]:
        """The combinations a pass over a range needs (read transactions only)."""
        if short and not self._committed_upto:
            return self.referenced(conn, facets_where, binds)
        return self.committed(conn)

    def ids_of(self, conn: Connection, combos: set[Combo]) -> dict[Combo, int]:
        """Ids of these combinations, inserting the new ones (the caller holds the chain's
        lock). One identity's combos are only inserted under that lock, so whatever another
        process added since we last looked has ids past the newest we know: only those rows
        are read, not all of them again."""
        missing = combos - self.ids.keys()
        if not missing:
            return self.ids
        self._rows_after(conn, self._newest)
        missing -= self.ids.keys()
        if missing:
            insert_rows(conn, result_combos, _COMBO_COLUMNS,
                        [(*combo, self.identity_hash) for combo in sorted(missing)])
            self._rows_after(conn, self._newest)
        return self.ids

    def _rows_after(self, conn: Connection, newest: int) -> dict[int, Combo]:
        mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
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


def insert_facets(conn: Connection, results: list[tuple[int, int, int, str | dict]],
                  combo_ids: ComboIds, rollup: RollupShape) -> int:
    """Index (event id, seq, stamp_ns, payload_json) execution results of one identity
    (the payload may be given decoded from that JSON already), and add them to the
    rollups of their blocks; returns how many."""
    if not results:
        return 0
    decoded = [(event_id, seq, stamp_ns,
                *(facets_of(payload, stamp_ns) if isinstance(payload, str)
                  else facets_of_payload(payload, stamp_ns)))
               for event_id, seq, stamp_ns, payload in results]
    ids = combo_ids.ids_of(conn, {combo for *_, combo, _ in decoded})
    ident = combo_ids.identity_hash
    facets, values = [], []
    outcome_sums: dict[tuple, list[int]] = {}
    value_sums: dict[tuple, list[int]] = {}
    for event_id, seq, stamp_ns, combo, named in decoded:
        combo_id = ids[combo]
        block = (seq - 1) // rollup.block
        facets.append((event_id, ident, seq, stamp_ns, combo_id))
        values += [(event_id, ident, combo_id, stamp_ns, source, name, value)
                   for source, name, value in named]
        # Within a batch, rows come in chain order: ids and seqs only grow.
        key = (combo_id, stamp_ns // rollup.bucket_ns, block)
        sums = outcome_sums.get(key)
        if sums is None:
            outcome_sums[key] = [1, event_id, event_id, stamp_ns, seq]
        else:
            sums[0] += 1
            sums[2] = event_id
            if stamp_ns > sums[3]:
                sums[3] = stamp_ns
        for source, name, value in named:
            key = (combo_id, source, name, value, block)
            sums = value_sums.get(key)
            if sums is None:
                value_sums[key] = [1, event_id, stamp_ns]
            else:
                sums[0] += 1
                sums[1] = event_id
                if stamp_ns > sums[2]:
                    sums[2] = stamp_ns
    insert_rows(conn, result_facets, _FACET_COLUMNS, facets)
    insert_rows(conn, result_values, _VALUE_COLUMNS, values)
    add_to_rollups(conn, ident, [(*key, *sums) for key, sums in outcome_sums.items()],
                   [(*key, *sums) for key, sums in value_sums.items()])
    return len(facets)


def add_to_rollups(conn: Connection, identity_hash: str, outcomes: list[tuple],
                   values: list[tuple]) -> None:
    """Add partial sums to the rollup rows of their blocks (a row a block does not have
    yet is inserted). outcomes: (combo_id, bucket, seq_block, n, min id, max id, max stamp,
    min seq); values: (combo_id, source, name, value_repr, seq_block, n, max id, max stamp)."""
    dialect = (conn.dialect.name, conn.dialect.paramstyle)
    if outcomes:
        conn.exec_driver_sql(_upsert_sql(*dialect, "result_rollup"),
                             [(identity_hash, *row) for row in outcomes])
    if values:
        conn.exec_driver_sql(_upsert_sql(*dialect, "value_rollup"),
                             [(identity_hash, *row) for row in values])


# Each rollup's key, and its other columns with how two partial sums combine.
_ROLLUPS = {
    "result_rollup": (("identity_hash", "combo_id", "bucket", "seq_block"),
                      (("n", "+"), ("min_event_id", "min"), ("max_event_id", "max"),
                       ("max_stamp_ns", "max"), ("min_seq", "min"))),
    "value_rollup": (("identity_hash", "combo_id", "source", "name", "value_repr", "seq_block"),
                     (("n", "+"), ("max_event_id", "max"), ("max_stamp_ns", "max"))),
}


@functools.cache
def _upsert_sql(dialect: str, paramstyle: str, table: str) -> str:
    """INSERT ... ON CONFLICT DO UPDATE adding to the row (SQLite >= 3.24 and PostgreSQL
    spell it alike; only the two-argument min/max differ)."""
    key, sums = _ROLLUPS[table]
    mark = "?" if paramstyle == "qmark" else "%s"
    scalar = ({"min": "min", "max": "max"} if dialect == "sqlite"
              else {"min": "LEAST", "max": "GREATEST"})
    columns = (*key, *(name for name, _ in sums))
    updates = ", ".join(
        f"{name} = {table}.{name} + excluded.{name}" if how == "+"
        else f"{name} = {scalar[how]}({table}.{name}, excluded.{name})" for name, how in sums)
    return (f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
            f"({', '.join([mark] * len(columns))}) ON CONFLICT ({', '.join(key)}) "
            f"DO UPDATE SET {updates}")


_FACET_COLUMNS = ("event_id", "identity_hash", "seq", "stamp_ns", "combo_id")
_VALUE_COLUMNS = ("event_id", "identity_hash", "combo_id", "stamp_ns", "source", "name",
                  "value_repr")

"""Execution results of a range of one chain, aggregated in SQL for the consolidation
rules (`result_aggregates`): value x count, never one row per event. The statements are
the same on SQLite and PostgreSQL but for an index hint only SQLite takes.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from sqlalchemy import Connection

from robot_memory.store.bulk import placeholder
from robot_memory.store.facets import facets_of_payload, floor_div_sql
from robot_memory.store.schema import OBSERVATION, PARAMETER

# grouped_values's tag of parameter rows grouped by time bucket too (not a source).
BUCKETED = -1

# Results in a range read with just the combinations it uses (ComboIds.for_short_range).
SHORT_RANGE = 20_000


def _driver_batches(conn: Connection, sql: str, params: Sequence, size: int = 5000
                    ) -> Iterator[list[tuple]]:
    """The rows of a statement (written with the driver's parameter marks), `size` at a
    time, as the driver's tuples, from a cursor of `conn`'s own connection (its
    transaction and snapshot). SQLAlchemy's result rows cost about a microsecond each:
    a third of the time a full pass over 10^5 results spends reading its 10^5 groups."""
    cursor = conn.connection.cursor()
    try:
        cursor.execute(sql, params)
        while True:
            rows = cursor.fetchmany(size)
            if not rows:
                return
            yield rows
    finally:
        cursor.close()


def _driver_rows(conn: Connection, sql: str, params: Sequence) -> Iterator[tuple]:
    for rows in _driver_batches(conn, sql, params):
        yield from rows


def _whole_blocks(after_seq: int, until_seq: int, size: int) -> tuple[int, int] | None:
    """[first, end) of the rollup blocks that after_seq < seq <= until_seq covers whole
    (block b holds seq b*size+1 .. (b+1)*size), or None when it covers none."""
    first, end = -(-after_seq // size), until_seq // size
    return (first, end) if first < end else None


# The newest result of an observation's group, from the result rows and the rollups.
_NEWEST_RESULT = ", max(event_id), max(stamp_ns)"
_NEWEST_ROLLED_UP = ", max(max_event_id), max(max_stamp_ns)"


class OutcomeRow(NamedTuple):
    """One GROUP BY row of a range's execution results: `count` results with these
    fields in time bucket `bucket`, the newest of them `max_event_id` (stamp
    `max_stamp_ns`). Rules may unpack it positionally, in this order."""

    invalid_reason: str | None  # None: a result the rules can read
    skill_id: str
    target_class: str
    environment: str
    zone: str
    success: int
    failure_reason: str
    has_observations: int
    bucket: int
    count: int
    min_event_id: int
    max_event_id: int
    max_stamp_ns: int
    min_seq: int


class ParameterCount(NamedTuple):
    """How many results of one outcome group used one value of one parameter."""

    skill_id: str
    target_class: str
    environment: str
    success: bool
    failure_reason: str
    name: str
    value_repr: str
    count: int


class BucketedParameterCount(NamedTuple):
    """How many results of one outcome group in one event-time bucket used one value of
    one parameter (read only when a pass asks for them: parameter_buckets)."""

    skill_id: str
    target_class: str
    environment: str
    success: bool
    failure_reason: str
    name: str
    value_repr: str
    bucket: int
    count: int


class ObservationCount(NamedTuple):
    """How many results observed one value of one property of a target, and the newest."""

    target_class: str
    name: str
    value_repr: str
    count: int
    max_event_id: int
    max_stamp_ns: int


@dataclass
class ValueBatch:
    """Some of a range's parameters and observations, aggregated (value x count). With
    parameter_buckets asked for, the parameters also per event-time bucket
    (bucketed_parameters; `parameters` then holds the same rows without their bucket: a
    group in several rows, to be added up)."""

    parameters: list[ParameterCount]
    observations: list[ObservationCount]
    bucketed_parameters: list[BucketedParameterCount] = field(default_factory=list)


@dataclass
class ResultAggregates:
    """Execution results of a range of one chain, aggregated in SQL. Both are streamed
    from the cursor: iterate `outcomes` once, then `values` once.

    outcomes: OutcomeRow after OutcomeRow
    values: ValueBatch after ValueBatch
    """

    outcomes: Iterable[OutcomeRow]
    values: Iterable[ValueBatch]
    # What amendments in the range change in the counts (store/amendments.py): outcome
    # rows of signed counts (no newest support: its columns 0) and their parameters,
    # to add up after the outcomes and the values above, not results of their own.
    amended: Sequence[OutcomeRow] = ()
    amended_values: Sequence[ValueBatch] = ()


def one_result_aggregates(payload: dict, stamp_ns: int, event_id: int, bucket_ns: int,
                          parameter_bucket_ns: int = 0) -> ResultAggregates:
    """What `result_aggregates` gives for a range that holds this one execution result
    (its payload as stored): one outcome row counting 1, and its values, from the facets
    an append derives from the same payload. For reading results one at a time through
    the rules' set-based methods, as `explain` does (min_seq is not known here: 0)."""
    combo, values = facets_of_payload(payload, stamp_ns)
    skill, target, environment, _zone, success, reason = combo[:6]
    bucket = stamp_ns // bucket_ns
    outcome = OutcomeRow(combo[7] or None, *combo[:7], bucket, 1, event_id,
                         event_id, stamp_ns, 0)
    parameters = [ParameterCount(skill, target, environment, success, reason, name, value, 1)
                  for source, name, value in values if source == PARAMETER]
    parameter_bucket = stamp_ns // (parameter_bucket_ns or bucket_ns)
    bucketed = [BucketedParameterCount(skill, target, environment, success, reason, name,
                                       value, parameter_bucket, 1)
                for source, name, value in values if source == PARAMETER]
    observations = [ObservationCount(target, name, value, 1, event_id, stamp_ns)
                    for source, name, value in values if source == OBSERVATION and target]
    return ResultAggregates([outcome], [ValueBatch(parameters, observations, bucketed)])


class ResultAggregation:
    """The aggregate reads' part of a Partition (store/partition.py), which gives it
    `store`, `identity_hash`, its chain number (`chain_number`) and the combination ids
    of its results (`_combos`)."""

    def result_aggregates(self, after_seq: int, until_seq: int, bucket_ns: int,
                          conn: Connection, until_stamp_ns: int | None = None,
                          parameter_buckets: int = 0, originals_after: int = 0
                          ) -> ResultAggregates:
        """The execution results after_seq < seq <= until_seq (and stamp <= until_stamp_ns)
        grouped by what the rules group and count by: value x count, never one row per
        event. The database groups by small integers (combination, time bucket); the
        combinations are spelled out here. The rollup blocks the range covers whole are
        read from the rollups, the ends of the range from the result rows; a group may
        come in several rows, to be added up. Both parts stream from cursors: iterate
        `outcomes`, then `values`, each once, before any other query on this connection's
        snapshot is needed. With parameter_buckets (a bucket width in ns; 0: not asked
        for), the parameters are grouped by event-time buckets of that width too
        (ValueBatch.bucketed_parameters): a whole block's come from its sums when all its
        results fall in one bucket, else from its result rows. What amendments in the
        range change is added (`amended`) for the attempts whose original lies after
        `originals_after` (a reset's position: an attempt from before it counts no more)."""
        chain = self.chain_number(conn)
        rollup = self.store.rollup
        blocks = _whole_blocks(after_seq, until_seq, rollup.block)
        if blocks is None or until_stamp_ns is not None or bucket_ns % rollup.bucket_ns \
                or parameter_buckets % rollup.bucket_ns:
            # Nothing to take whole (a short range, a cut in event time, or time buckets the
            # rollup's do not add up to): the result rows alone.
            blocks, ends = None, [(after_seq, until_seq)]
        else:
            size = rollup.block
            ends = [(lo, hi) for lo, hi in ((after_seq, blocks[0] * size),
                                            (blocks[1] * size, until_seq)) if lo < hi]
        mark = placeholder(conn)
        stamp = "" if until_stamp_ns is None else f" AND stamp_ns <= {mark}"
        pieces = []  # (facets WHERE, its parameters, first and last event id) of each end
        for lo, hi in ends:
            params = (chain, lo, hi) if until_stamp_ns is None else \
                (chain, lo, hi, until_stamp_ns)
            where = f"chain_id = {mark} AND seq > {mark} AND seq <= {mark}{stamp}"
            id_lo, id_hi = conn.exec_driver_sql(
                f"SELECT min(event_id), max(event_id) FROM result_facets WHERE {where}",
                params).one()
            if id_lo is not None:
                pieces.append((where, params, id_lo, id_hi))
        amended, amended_values = self._amended(conn, chain, after_seq, until_seq, bucket_ns,
                                                until_stamp_ns, parameter_buckets,
                                                originals_after)
        if not pieces and blocks is None:
            return ResultAggregates([], [], amended, amended_values)
        # A short range (a consolidator's tick) reads the combinations it uses; a long one
        # all of them, kept for the next pass (rows are only added).
        if blocks is None and until_seq - after_seq <= SHORT_RANGE:
            combos = self._combos.for_short_range(conn, pieces[0][0], pieces[0][1])
        else:
            combos = self._combos.committed(conn)
        block_where = (f"chain_id = {mark} AND seq_block >= {mark} AND seq_block < {mark}")
        block_params = (chain, *blocks) if blocks else ()

        def grouped_outcomes() -> Iterator[tuple]:
            for where, params, _, _ in pieces:
                yield from _driver_rows(conn, (
                    f"SELECT combo_id, {floor_div_sql('stamp_ns', bucket_ns)}, count(*), "
                    f"min(event_id), max(event_id), max(stamp_ns), min(seq) "
                    f"FROM result_facets WHERE {where} GROUP BY 1, 2"), params)
            if blocks:
                # Straight from the primary key's order when the buckets are the rollup's.
                bucket = floor_div_sql("bucket", bucket_ns // rollup.bucket_ns)
                yield from _driver_rows(conn, (
                    f"SELECT combo_id, {bucket}, CAST(sum(n) AS BIGINT), min(min_event_id), "
                    "max(max_event_id), max(max_stamp_ns), min(min_seq) FROM result_rollup "
                    f"WHERE {block_where} GROUP BY combo_id, 2"), block_params)

        # Parameters and observations are read apart (source is a column of the
        # primary key, so each is its own range of groups): a parameter's rows carry no
        # newest event, and SQLite sorts two halves and computes the maxima for one,
        # a fifth less time than grouping them together on a 10^4-fact key space.
        def grouped_values() -> Iterator[tuple[int, list[tuple]]]:
            if parameter_buckets:
                yield from bucketed_parameters()
            for source, newest in ((PARAMETER, ""), (OBSERVATION, _NEWEST_RESULT)):
                if source == PARAMETER and parameter_buckets:
                    continue
                for _, params, id_lo, id_hi in pieces:
                    for rows in _driver_batches(conn, (
                            f"SELECT combo_id, name, value_repr, count(*){newest} "
                            f"FROM result_values WHERE event_id >= {mark} AND event_id <= "
                            f"{mark} AND source = {source} AND chain_id = {mark}{stamp} "
                            "GROUP BY combo_id, name, value_repr"),
                            (id_lo, id_hi, chain, *params[3:])):
                        yield source, rows
                if blocks:
                    rolled_newest = newest and _NEWEST_ROLLED_UP
                    for rows in _driver_batches(conn, (
                            f"SELECT combo_id, name, value_repr, CAST(sum(n) AS BIGINT)"
                            f"{rolled_newest} FROM value_rollup WHERE {block_where} AND "
                            f"source = {source} GROUP BY combo_id, name, value_repr"),
                            block_params):
                        yield source, rows

        def bucketed_parameters() -> Iterator[tuple[int, list[tuple]]]:
            """(BUCKETED, rows of combo_id, bucket, name, value_repr, count)."""
            by_bucket = floor_div_sql("stamp_ns", parameter_buckets)
            rows_sql = (f"SELECT combo_id, {by_bucket}, name, value_repr, count(*) "
                        f"FROM result_values WHERE event_id >= {mark} AND event_id <= {mark} "
                        f"AND source = {PARAMETER} AND chain_id = {mark}{stamp} "
                        "GROUP BY 1, 2, 3, 4")
            ranges = [(id_lo, id_hi, *params[3:]) for _, params, id_lo, id_hi in pieces]
            if blocks:
                # A block whose results all fall in one of the pass's buckets: its value
                # sums are that bucket's. The others (a bucket starts inside the block)
                # are read from their result rows, by the block's event ids.
                in_pass_buckets = floor_div_sql("bucket",
                                                parameter_buckets // rollup.bucket_ns)
                spans = (f"SELECT seq_block, min(b) AS b, min(lo) AS lo, max(hi) AS hi "
                         f"FROM (SELECT seq_block, {in_pass_buckets} AS b, min_event_id AS "
                         f"lo, max_event_id AS hi FROM result_rollup WHERE {block_where}) "
                         "spans GROUP BY seq_block")
                for rows in _driver_batches(conn, (
                        f"SELECT v.combo_id, s.b, v.name, v.value_repr, "
                        f"CAST(sum(v.n) AS BIGINT) FROM value_rollup v JOIN ({spans} "
                        "HAVING min(b) = max(b)) s ON v.seq_block = s.seq_block WHERE "
                        f"v.chain_id = {mark} AND v.seq_block >= {mark} AND v.seq_block < "
                        f"{mark} AND v.source = {PARAMETER} "
                        "GROUP BY v.combo_id, s.b, v.name, v.value_repr"),
                        (*block_params, *block_params)):
                    yield BUCKETED, rows
                ranges += [(lo, hi) for lo, hi in conn.exec_driver_sql(
                    f"SELECT lo, hi FROM ({spans} HAVING min(b) < max(b)) s ORDER BY lo",
                    block_params).all()]
            for id_range in ranges:
                for rows in _driver_batches(conn, rows_sql,
                                            (id_range[0], id_range[1], chain, *id_range[2:])):
                    yield BUCKETED, rows

        parameter_row, observation_row = ParameterCount._make, ObservationCount._make
        bucketed_row = BucketedParameterCount._make
        intern = sys.intern

        def values() -> Iterator[ValueBatch]:
            # Run once the outcomes are read, and handed on a batch at a time: at 10^6
            # events they are 10^5 rows, and held together they were a fifth of a pass's
            # peak memory (and left the small-object heap fragmented after it).
            # _make (tuple.__new__) costs about half a NamedTuple's own constructor, and a
            # key-space pass makes 10^5 of these rows.
            for source, rows in grouped_values():
                batch = ValueBatch([], [])
                if source == BUCKETED:  # and each row again without its bucket
                    bucketed, parameters = batch.bucketed_parameters, batch.parameters
                    for combo_id, bucket, name, value, count in rows:
                        combo = combos.get(combo_id)
                        if combo is not None:  # None: another identity's
                            skill, target, environment, _zone, success, reason = combo[:6]
                            name, value = intern(name), intern(value)
                            bucketed.append(bucketed_row((
                                skill, target, environment, success, reason, name, value,
                                buckets.setdefault(bucket, bucket), count)))
                            parameters.append(parameter_row((
                                skill, target, environment, success, reason, name, value,
                                count)))
                elif source == PARAMETER:
                    parameters = batch.parameters
                    for combo_id, name, value, count in rows:
                        combo = combos.get(combo_id)
                        if combo is not None:  # None: another identity's
                            skill, target, environment, _zone, success, reason = combo[:6]
                            parameters.append(parameter_row((
                                skill, target, environment, success, reason, intern(name),
                                intern(value), count)))
                else:
                    observations = batch.observations
                    for combo_id, name, value, count, max_id, max_stamp in rows:
                        combo = combos.get(combo_id)
                        if combo is not None and combo[1]:  # a target's
                            observations.append(observation_row((
                                combo[1], intern(name), intern(value), count, max_id,
                                max_stamp)))
                yield batch

        # One int object per time bucket, not one per row: the rules keep them as keys of
        # 10^5 bucket counts at 10^6 events (6 MB of copies of a few dozen numbers).
        buckets: dict[int, int] = {}
        row = OutcomeRow._make
        outcomes = (row((combo[7] or None, *combo[:7], buckets.setdefault(bucket, bucket),
                         count, min_id, max_id, max_stamp, min_seq))
                    for combo_id, bucket, count, min_id, max_id, max_stamp, min_seq
                    in grouped_outcomes()
                    for combo in (combos[combo_id],))
        return ResultAggregates(outcomes, values(), amended, amended_values)

    def amendment_dispositions(self, after_seq: int, until_seq: int, conn: Connection
                               ) -> dict[str, int]:
        """What became of the amendments after_seq < seq <= until_seq, as a pass counts
        them (store/amendments.py: applied, superseded, held, refused:<why>)."""
        mark = placeholder(conn)
        return dict(conn.exec_driver_sql(
            f"SELECT disposition, count(*) FROM result_amendments WHERE chain_id = {mark} "
            f"AND seq > {mark} AND seq <= {mark} GROUP BY disposition ORDER BY disposition",
            (self.chain_number(conn), after_seq, until_seq)).all())

    def _amended(self, conn: Connection, chain: int, after_seq: int, until_seq: int,
                 bucket_ns: int, until_stamp_ns: int | None, parameter_buckets: int,
                 originals_after: int) -> tuple[list[OutcomeRow], list[ValueBatch]]:
        """The signed rows of the amendments after_seq < seq <= until_seq (written by
        events stamped <= until_stamp_ns), grouped as result_aggregates groups results:
        by combination and the time bucket of the original's stamp. Read whole (they are
        few), before the streams of results open their cursors."""
        mark = placeholder(conn)
        stamp = "" if until_stamp_ns is None else f" AND at_stamp_ns <= {mark}"
        params = (chain, after_seq, until_seq, originals_after) + (
            () if until_stamp_ns is None else (until_stamp_ns,))
        where = (f"chain_id = {mark} AND seq > {mark} AND seq <= {mark} AND original_seq > "
                 f"{mark}{stamp}")
        rows = conn.exec_driver_sql(
            f"SELECT combo_id, {floor_div_sql('stamp_ns', bucket_ns)}, CAST(sum(n) AS BIGINT) "
            f"FROM amendment_deltas WHERE {where} GROUP BY 1, 2 ORDER BY 1, 2", params).all()
        if not rows:
            return [], []
        combos = self._combos.committed(conn)
        # Rows that sum to 0 too: another attempt's parameters may move under the same
        # combination, and the rules add values into the groups the outcomes made.
        outcomes = [OutcomeRow(None, *combos[combo_id][:7], bucket, n, 0, 0, 0, 0)
                    for combo_id, bucket, n in rows]
        batch = ValueBatch([], [])
        by_bucket = floor_div_sql("stamp_ns", parameter_buckets or bucket_ns)
        for combo_id, bucket, name, value, n in conn.exec_driver_sql(
                f"SELECT combo_id, {by_bucket}, name, value_repr, CAST(sum(n) AS BIGINT) "
                f"FROM amendment_delta_values WHERE {where} GROUP BY 1, 2, 3, 4 "
                "ORDER BY 1, 2, 3, 4", params).all():
            if not n:
                continue
            skill, target, environment, _zone, success, reason = combos[combo_id][:6]
            batch.parameters.append(ParameterCount(skill, target, environment, success,
                                                   reason, name, value, n))
            if parameter_buckets:
                batch.bucketed_parameters.append(BucketedParameterCount(
                    skill, target, environment, success, reason, name, value, bucket, n))
        return outcomes, [batch]

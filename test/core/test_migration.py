"""Schema 1, 2, 3, 4, 5 and 6 -> 7: a store written before the result facets (1) or their
rollups (2) existed, with the rollups in pass order (3), with the result index keyed by
identity hash (4), without the acknowledged requests (5) or without the intent index (6),
is upgraded when it is opened (or by `robot-memory migrate`): verified before and after,
logged as an event, no event rewritten, and consolidation goes on to the same facts."""

import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing

import oracle_consolidation
import pytest
from helpers import varied_events
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.dialects import postgresql as postgresql_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from robot_memory.consolidation import consolidation_pass, facts_snapshot, replay_snapshot
from robot_memory.event_kinds import EXECUTION_RESULT, SCHEMA_MIGRATION
from robot_memory.intake.ingest import Ingest
from robot_memory.intake.requests import Replayed
from robot_memory.store import MemoryStore, NewEvent, StoreError, verify_chain
from robot_memory.store.guards import SQLITE_GUARDS
from robot_memory.store.schema import (SCHEMA_VERSION, RollupShape, metadata, result_combos,
                                       result_facets, result_rollup, result_values,
                                       value_rollup)

IDENT, OTHER = "d" * 64, "e" * 64
REFUSE_UPDATE_TRIGGER = SQLITE_GUARDS[0]
SMALL_BLOCKS = RollupShape(block=16)  # so that a few hundred events fill blocks

# What each older version has on disk that the current one does not, and lacks.
ROLLUPS = ("result_rollup", "value_rollup")
GROUP_INDEX = ("CREATE INDEX ix_result_values_group ON result_values (identity_hash, combo_id, "
               "source, name, value_repr, event_id, stamp_ns)")


# Schema 4's and 5's rollups are clustered by chain block first (5's by chain number);
# 3's in the order a pass groups.
BLOCK_FIRST_KEYS = {"result_rollup": "chain_id, seq_block, combo_id, bucket",
                    "value_rollup": "chain_id, seq_block, combo_id, source, name, value_repr"}
V4_ROLLUP_KEYS = {table: key.replace("chain_id", "identity_hash")
                  for table, key in BLOCK_FIRST_KEYS.items()}
# Schema 3's: schema 4's columns and rows.
V3_ROLLUP_KEYS = {"result_rollup": "identity_hash, combo_id, bucket, seq_block",
                  "value_rollup": "identity_hash, combo_id, source, name, value_repr, seq_block"}


def v3_rollups(dialect: str) -> list[str]:
    """SQL that gives a current store's rollups schema 3's primary key (rows unchanged)."""
    if dialect == "postgresql":
        return [statement for table, key in V3_ROLLUP_KEYS.items() for statement in (
            f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey",
            f"ALTER TABLE {table} ADD CONSTRAINT {table}_pkey PRIMARY KEY ({key})")]
    return [statement for table, key in V3_ROLLUP_KEYS.items() for statement in (
        f"ALTER TABLE {table} RENAME TO {table}_new",
        f"CREATE TABLE {table} ({rollup_columns(table)}, PRIMARY KEY ({key})) WITHOUT ROWID",
        f"INSERT INTO {table} SELECT * FROM {table}_new",
        f"DROP TABLE {table}_new")]


def rollup_columns(table: str) -> str:
    """Schema 4's columns of a rollup table (the identity hash where 5 has the chain)."""
    return ", ".join(f"{v4_name(column.name)} NOT NULL"
                     for column in metadata.tables[table].columns)


def v4_name(column: str) -> str:
    return "identity_hash" if column == "chain_id" else column


def v4_index_tables(dialect: str) -> list[str]:
    """SQL that turns a current (schema 5) store into what schema 4 left on disk: the
    result index and its rollups keyed by identity hash, no chain numbers, and the kind
    index over every event."""
    compiler = (postgresql_dialect if dialect == "postgresql" else sqlite_dialect).dialect()
    statements = ["DROP INDEX ix_result_facets_chain_seq"]
    for table in (result_facets, result_values, result_rollup, value_rollup):
        name = table.name
        columns = [column.name for column in table.columns]
        typed = ", ".join(
            f"{v4_name(column.name)} "
            f"{'VARCHAR(64)' if column.name == 'chain_id' else column.type.compile(compiler)}"
            " NOT NULL" for column in table.columns)
        key = ("" if table is result_values  # 4's had none (an index on event_id)
               else ", ".join(v4_name(column.name) for column in table.primary_key.columns))
        without_rowid = " WITHOUT ROWID" if dialect == "sqlite" and "rollup" in name else ""
        statements += [f"ALTER TABLE {name} RENAME TO {name}_v5"]
        if dialect == "postgresql":
            statements += [f"ALTER INDEX {name}_pkey RENAME TO {name}_v5_pkey"]
        picked = ", ".join("c.identity_hash" if column == "chain_id" else f"o.{column}"
                           for column in columns)
        statements += [
            f"CREATE TABLE {name} ({typed}{f', PRIMARY KEY ({key})' if key else ''})"
            f"{without_rowid}",
            f"INSERT INTO {name} ({', '.join(v4_name(c) for c in columns)}) SELECT {picked} "
            f"FROM {name}_v5 o JOIN chains c ON c.chain_id = o.chain_id",
            f"DROP TABLE {name}_v5"]
    if dialect == "postgresql":
        statements += ["ALTER TABLE events "
                       "ALTER COLUMN prev_hash TYPE varchar(64) USING encode(prev_hash, 'hex'), "
                       "ALTER COLUMN event_hash TYPE varchar(64) USING encode(event_hash, 'hex')"]
    else:  # hex text in the same columns (SQLite keeps whatever a column is given)
        statements += ["DROP TRIGGER events_refuse_update",
                       "UPDATE events SET prev_hash = lower(hex(prev_hash)), "
                       "event_hash = lower(hex(event_hash))",
                       REFUSE_UPDATE_TRIGGER]
    return statements + [
        "CREATE INDEX ix_result_facets_identity_seq ON result_facets (identity_hash, seq)",
        "CREATE INDEX ix_result_values_event ON result_values (event_id)",
        "DROP TABLE chains",
        "DROP INDEX ix_events_identity_kind_seq_other",
        "CREATE INDEX ix_events_identity_kind_seq ON events (identity_hash, kind, seq)",
        "UPDATE store_info SET value = '4' WHERE key = 'schema_version'"]


def rollup_keys(path) -> dict[str, str]:
    """The primary key of each rollup table of the SQLite store at path, as column names."""
    with closing(sqlite3.connect(path)) as conn:
        return {table: ", ".join(row[2] for row in conn.execute(
                    f"PRAGMA index_info(sqlite_autoindex_{table}_1)"))
                for table in ROLLUPS}


# What schema 6 left on disk: no fleet segments.
# What schema 6 left on disk: no fleet segments, no intent index; schema 5: no
# acknowledged requests either.
V6 = ["DROP TABLE fleet_segment_chunks", "DROP TABLE fleet_segments", "DROP TABLE intent_events",
      "UPDATE store_info SET value = '6' WHERE key = 'schema_version'"]
V5 = V6[:-1] + ["DROP TABLE request_ids",
                "UPDATE store_info SET value = '5' WHERE key = 'schema_version'"]


def older_schema(version: int, dialect: str = "sqlite") -> list[str]:
    """SQL that turns a current store into what `version` left on disk."""
    if version == SCHEMA_VERSION:
        return []
    if version == 6:
        return V6
    if version == 5:
        return V5
    v4 = V5[:-1] + v4_index_tables(dialect)
    if version == 4:
        return v4
    if version == 3:
        return v4 + v3_rollups(dialect) + [
            "UPDATE store_info SET value = '3' WHERE key = 'schema_version'"]
    dropped = ROLLUPS + (("result_values", "result_facets", "result_combos")
                         if version == 1 else ())
    return (v4 + [f"DROP TABLE {table}" for table in dropped]
            + ([GROUP_INDEX] if version == 2 else [])
            + ["DELETE FROM store_info WHERE key LIKE 'rollup_%'",
               f"UPDATE store_info SET value = '{version}' WHERE key = 'schema_version'"])


def build_v1_store(path, consolidated_events: int = 150, later_events: int = 100,
                   version: int = 1) -> None:
    """What version 1 (or 2) left on disk: the log, a pass by the engine of that version
    over part of it, and no result facets (or no rollups; the tables are dropped with raw
    SQL)."""
    events = varied_events(consolidated_events + later_events)
    store = MemoryStore(f"sqlite:///{path}", rollup=SMALL_BLOCKS)
    part = store.partition(IDENT)
    part.append_many(events[:consolidated_events])
    part.append("execution_result", {"skill_id": "", "success": True}, 7)  # legacy row
    store.partition(OTHER).append_many(events[:20])
    oracle_consolidation.consolidation_pass(part)
    part.append_many(events[consolidated_events:])
    store.close()
    with closing(sqlite3.connect(path)) as conn:
        for statement in older_schema(version):
            conn.execute(statement)
        conn.commit()


def raw_events(path):
    """The events as stored, their hashes as hex (schema 5 stores 32 bytes, older ones
    64 hex digits)."""
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT id, identity_hash, seq, kind, stamp_ns, payload_json, "
                            "prev_hash, event_hash FROM events ORDER BY id").fetchall()
    return [(*row[:6], *(h.hex() if isinstance(h, bytes) else h for h in row[6:]))
            for row in rows]


def test_a_v1_store_migrates_on_open_verifies_and_keeps_every_event(tmp_path):
    path = tmp_path / "v1.db"
    build_v1_store(path)
    before = raw_events(path)
    store = MemoryStore(f"sqlite:///{path}")
    report = store.migration
    assert report is not None and (report.from_version, report.to_version) == \
        (1, SCHEMA_VERSION)
    assert report.results_indexed == {IDENT: 251, OTHER: 20}
    assert report.events_verified_before == len(before)
    after = raw_events(path)
    assert after[:len(before)] == before  # nothing rewritten, nothing removed
    added = after[len(before):]
    assert [(row[1], row[3]) for row in added] == [(IDENT, SCHEMA_MIGRATION),
                                                   (OTHER, SCHEMA_MIGRATION)]
    for ident in (IDENT, OTHER):
        assert verify_chain(store.partition(ident)).ok
    with store.read() as conn:
        indexed = conn.execute(select(func.count()).select_from(result_facets)).scalar()
        invalid = conn.execute(select(func.count()).select_from(result_facets.join(
            result_combos, result_combos.c.combo_id == result_facets.c.combo_id)).where(
            result_combos.c.invalid_reason != "")).scalar()
    assert (indexed, invalid) == (271, 1)
    store.close()
    assert MemoryStore(f"sqlite:///{path}").migration is None  # once only


def test_consolidation_after_migration_gives_the_same_facts(tmp_path):
    """The migrated store's next (set-based) pass picks up where the old engine's pass
    stopped and ends where the old engine alone ends."""
    path, reference = tmp_path / "v1.db", tmp_path / "reference.db"
    build_v1_store(path)
    shutil.copy(path, reference)
    migrated = MemoryStore(f"sqlite:///{path}").partition(IDENT)
    report = consolidation_pass(migrated)
    assert report.events_read == 100 and report.applied
    old = MemoryStore(f"sqlite:///{reference}").partition(IDENT)
    oracle_consolidation.consolidation_pass(old)
    assert migrated.facts() == old.facts()
    assert facts_snapshot(migrated) == replay_snapshot(migrated)
    assert consolidation_pass(migrated).facts_touched == 0


def test_a_tampered_v1_store_is_not_migrated(tmp_path):
    path = tmp_path / "v1.db"
    build_v1_store(path)
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("DROP TRIGGER events_refuse_update")
        conn.execute("UPDATE events SET payload_json = '{}' WHERE seq = 3")
        conn.commit()
    with pytest.raises(StoreError, match="migration refused before.*seq 3"):
        MemoryStore(f"sqlite:///{path}")
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT value FROM store_info").fetchone() == ("1",)
        assert conn.execute("SELECT count(*) FROM events WHERE kind = ?",
                            (SCHEMA_MIGRATION,)).fetchone() == (0,)


def test_robot_memory_migrate_command(tmp_path):
    path = tmp_path / "v1.db"
    build_v1_store(path)
    command = [sys.executable, "-m", "robot_memory.cli", "migrate", "--db", f"sqlite:///{path}"]
    first = subprocess.run(command, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert (f"migrated schema 1 -> {SCHEMA_VERSION}: indexed 271 execution results of "
            "2 identities") in first.stdout
    again = subprocess.run(command, capture_output=True, text=True)
    assert again.returncode == 0 and "nothing to migrate" in again.stdout


def test_a_new_store_starts_at_the_current_schema_and_indexes_on_append(db_url):
    store = MemoryStore(db_url)
    part = store.partition(IDENT)
    part.append_many(varied_events(5) + [NewEvent("override", {"action": "freeze"}, 1)])
    with store.read() as conn:
        assert conn.execute(select(func.count()).select_from(result_facets)).scalar() == 5
        assert conn.exec_driver_sql("SELECT value FROM store_info").scalar() == \
            str(SCHEMA_VERSION)
    assert part.count_events(EXECUTION_RESULT) == 5


def test_a_v1_store_migrates_on_postgresql(pg_url):
    store = MemoryStore(pg_url)
    part = store.partition(IDENT)
    part.append_many(varied_events(60))
    oracle_consolidation.consolidation_pass(part)
    part.append_many(varied_events(90)[60:])
    store.close()
    engine = create_engine(pg_url)
    with engine.begin() as conn:  # what version 1 left: no result tables, version 1
        for statement in older_schema(1, "postgresql"):
            conn.execute(text(statement))
    engine.dispose()
    migrated = MemoryStore(pg_url)
    assert migrated.migration.results_indexed == {IDENT: 90}
    part = migrated.partition(IDENT)
    assert verify_chain(part).ok
    assert consolidation_pass(part).events_read == 30
    assert facts_snapshot(part) == replay_snapshot(part)
    migrated.close()


def rollup_rows(url):
    """The rollups with each combo_id spelled out (ids depend on the order of indexing)."""
    engine = create_engine(url)
    with engine.connect() as conn:
        combos = {row[0]: tuple(row[1:]) for row in conn.execute(text(
            "SELECT combo_id, identity_hash, skill_id, target_class, environment, zone, "
            "success, failure_reason, has_observations, invalid_reason FROM result_combos"))}
        rows = {table: sorted((combos[row[1]], *row[2:]) for row in conn.execute(text(
            f"SELECT * FROM {table}"))) for table in ROLLUPS}
    engine.dispose()
    return rows


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_an_older_store_gets_the_rollups_appending_would_have_written(tmp_path, version):
    """The migration sums the rollups in SQL (from 2), by re-indexing (from 1) or copies
    them into the new key (from 3 and 4); either way they are the rows the current append
    writes for the same log, clustered by block and keyed by chain number."""
    path, current = tmp_path / "old.db", tmp_path / "current.db"
    build_v1_store(path, version=version)
    build_v1_store(current, version=SCHEMA_VERSION)  # the same log, rolled up on append
    if version >= 3:
        assert rollup_keys(path) == {3: V3_ROLLUP_KEYS, 4: V4_ROLLUP_KEYS}[version]
    store = MemoryStore(f"sqlite:///{path}", rollup=SMALL_BLOCKS)
    assert (store.migration.from_version, store.migration.to_version) == \
        (version, SCHEMA_VERSION)
    assert rollup_keys(path) == rollup_keys(current) == BLOCK_FIRST_KEYS
    assert store.migration.results_indexed == {IDENT: 251, OTHER: 20}
    with store.read() as conn:
        indexes = conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'index'"
                                       ).scalars().all()
    assert "ix_result_values_group" not in indexes
    assert "ix_events_identity_kind_seq" not in indexes
    with closing(sqlite3.connect(path)) as raw:  # compacted: no page the old tables left
        assert raw.execute("PRAGMA freelist_count").fetchone() == (0,)
    assert {"ix_events_identity_kind_seq_other", "ix_result_facets_chain_seq"} <= set(indexes)
    migrated = rollup_rows(f"sqlite:///{path}")
    assert migrated == rollup_rows(f"sqlite:///{current}")
    # Every filled block is summed (the last, partly filled block of each chain is not).
    rolled_up = sum(row[3] for row in migrated["result_rollup"])  # n
    with store.read() as conn:
        expected = sum(conn.exec_driver_sql(
            "SELECT count(*) FROM result_facets f JOIN chains c ON c.chain_id = f.chain_id "
            "WHERE seq <= (SELECT seq FROM chain_heads h "
            "WHERE h.identity_hash = c.identity_hash) / 16 * 16"
            ).scalars())
    store.close()
    assert rolled_up == expected and expected > 200


def pg_rollup_keys(url) -> dict[str, str]:
    engine = create_engine(url)
    with engine.connect() as conn:
        keys = {table: ", ".join(conn.execute(text(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = CAST(:table AS regclass) "
            "AND i.indisprimary ORDER BY array_position(CAST(i.indkey AS int2[]), a.attnum)"),
            {"table": table}).scalars()) for table in ROLLUPS}
    engine.dispose()
    return keys


@pytest.mark.parametrize("version", [2, 3, 4])
def test_an_older_store_migrates_on_postgresql(pg_url, version):
    """On a real PostgreSQL server: the rollups the migration sums (from 2) or re-keys
    (from 3) are the rows the appends had written, under the block-first key."""
    store = MemoryStore(pg_url, rollup=SMALL_BLOCKS)
    part = store.partition(IDENT)
    part.append_many(varied_events(120))
    store.partition(OTHER).append_many(varied_events(40))
    consolidation_pass(part)
    part.append_many(varied_events(150)[120:])
    store.close()
    written = rollup_rows(pg_url)
    assert sum(row[3] for row in written["result_rollup"]) > 100
    engine = create_engine(pg_url)
    with engine.begin() as conn:
        for statement in older_schema(version, "postgresql"):
            conn.execute(text(statement))
    engine.dispose()
    if version >= 3:
        assert pg_rollup_keys(pg_url) == {3: V3_ROLLUP_KEYS, 4: V4_ROLLUP_KEYS}[version]
    migrated = MemoryStore(pg_url, rollup=SMALL_BLOCKS)
    assert (migrated.migration.from_version, migrated.migration.results_indexed) == \
        (version, {IDENT: 150, OTHER: 40})
    assert pg_rollup_keys(pg_url) == BLOCK_FIRST_KEYS
    assert rollup_rows(pg_url) == written
    part = migrated.partition(IDENT)
    assert verify_chain(part).ok
    assert consolidation_pass(part).events_read == 30
    assert facts_snapshot(part) == replay_snapshot(part)  # replay reads the rollups
    migrated.close()


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_a_v6_store_gets_the_fleet_segment_tables(tmp_path, request, dialect):
    """6 -> 7: the events are untouched, the chains verify, and the tables shipped
    segments go to exist, empty, with the schema 7 migration logged."""
    url = (f"sqlite:///{tmp_path / 'v6.db'}" if dialect == "sqlite"
           else request.getfixturevalue("pg_url"))
    store = MemoryStore(url)
    store.partition(IDENT).append_many(varied_events(30))
    store.close()
    engine = create_engine(url)
    with engine.begin() as conn:
        for statement in older_schema(6, dialect):
            conn.execute(text(statement))
    engine.dispose()
    migrated = MemoryStore(url)
    assert (migrated.migration.from_version, migrated.migration.to_version) == (6, 7)
    assert verify_chain(migrated.partition(IDENT)).ok
    with migrated.read() as conn:
        for table in ("fleet_segments", "fleet_segment_chunks"):
            assert conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() == 0
    migrated.close()


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_a_v5_store_gets_the_acknowledged_requests(tmp_path, request, dialect):
    """5 -> 6: the events are untouched, the chains verify, and a retried record_event
    is then stored once (the request ids table exists, empty, and is used)."""
    url = (f"sqlite:///{tmp_path / 'v5.db'}" if dialect == "sqlite"
           else request.getfixturevalue("pg_url"))
    store = MemoryStore(url)
    store.partition(IDENT).append_many(varied_events(40))
    store.close()
    engine = create_engine(url)
    with engine.begin() as conn:
        for statement in older_schema(5, dialect):
            conn.execute(text(statement))
    with engine.connect() as conn:
        before = conn.execute(text("SELECT id, event_hash FROM events ORDER BY id")).all()
    engine.dispose()
    migrated = MemoryStore(url)
    assert (migrated.migration.from_version, migrated.migration.to_version) == \
        (5, SCHEMA_VERSION)
    part = migrated.partition(IDENT)
    assert verify_chain(part).ok
    with migrated.read() as conn:
        assert conn.execute(text("SELECT id, event_hash FROM events ORDER BY id")
                            ).all()[:len(before)] == before
        assert conn.execute(text("SELECT count(*) FROM request_ids")).scalar() == 0
    ingest = Ingest(part, flush_period_s=0.01)
    result = {"stamp_ns": 1, "skill_id": "navigation.dock", "success": True}
    answers = [ingest.record_event(ingest.take_request(dict, dict(result), "record_event", 2,
                                                       "dock-1")).result(10)
               for _ in range(2)]
    ingest.close()
    assert answers[1] == Replayed(answers[0].id, answers[0].seq)
    assert part.count_events(EXECUTION_RESULT) == 41
    migrated.close()


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_a_v6_store_gets_the_intent_index(tmp_path, request, dialect):
    """6 -> 7: the intent index is back-filled from the stored results and consultations
    (the rows the appends write today), the events are untouched and the chains verify;
    the lineage of an intent is then read from it."""
    from robot_memory.event_kinds import FACT_CONSULTATION
    from robot_memory.grounding.lineage import explain_intent
    url = (f"sqlite:///{tmp_path / 'v6.db'}" if dialect == "sqlite"
           else request.getfixturevalue("pg_url"))
    store = MemoryStore(url)
    events = [e._replace(payload={**e.payload, "intent_id": f"i{i % 3}"}) if i % 2 else e
              for i, e in enumerate(varied_events(30))]
    store.partition(IDENT).append_many(
        events + [NewEvent(FACT_CONSULTATION, {"intent_id": "i1", "facts": []}, 99)])
    store.partition(OTHER).append_many(events[:5])
    store.close()
    engine = create_engine(url)
    index = "SELECT chain_id, intent_id, seq, event_id FROM intent_events ORDER BY 1, 2, 3"
    with engine.connect() as conn:
        appended = conn.execute(text(index)).all()
    with engine.begin() as conn:
        for statement in older_schema(6, dialect):
            conn.execute(text(statement))
    engine.dispose()
    migrated = MemoryStore(url)
    assert (migrated.migration.from_version, migrated.migration.intents_indexed) == \
        (6, {IDENT: 16, OTHER: 2})
    with migrated.read() as conn:
        assert conn.execute(text(index)).all() == appended
    part = migrated.partition(IDENT)
    assert verify_chain(part).ok
    lineage = explain_intent(part, "i1")
    assert len(lineage["consultations"]) == 1 and len(lineage["results"]) == 5
    assert [e.payload["intents_indexed"] for e in part.events([SCHEMA_MIGRATION])] == [16]
    migrated.close()

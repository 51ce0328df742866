"""Least privilege on a real PostgreSQL server: an owner role (not a superuser) sets up
the schema with `robot-memory db init`; each robot logs in with its own role. The
runtime role cannot bypass append-only, robot A cannot see or touch robot B's rows even
with hand-written SQL, an analytics role reads across robots, and the ordinary core
paths (log, consolidation, boot check, grounding index) work under the runtime role."""

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from helpers import result_event, varied_events
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from robot_memory.consolidation.consolidation_pass import consolidation_pass
from robot_memory.grounding.index import GroundingIndex, GroundingRequest
from robot_memory.intake.ingest import Ingest
from robot_memory.intake.requests import Replayed
from robot_memory.store import MemoryStore, check_store
from robot_memory.store.roles import (DERIVED_PRIVILEGES, RUNTIME_PRIVILEGES, identity_tables,
                                      security_statements)

A, B = "a" * 64, "b" * 64
PERMISSION_DENIED = "42501"  # SQLSTATE insufficient_privilege (grants and RLS checks)


def cli(*args):
    done = subprocess.run([sys.executable, "-m", "robot_memory.cli", *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


class Fleet:
    def __init__(self, server):
        suffix = uuid.uuid4().hex[:8]
        self.db = f"rm_fleet_{suffix}"
        self.owner, self.robot_a, self.robot_b = (f"rm_owner_{suffix}", f"robot_a_{suffix}",
                                                  f"robot_b_{suffix}")
        self.analyst = f"analyst_{suffix}"
        admin = create_engine(f"{server.url}/postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            # The owner is an ordinary role: it owns the database, may create roles.
            conn.execute(text(f"CREATE ROLE {self.owner} LOGIN CREATEROLE"))
            conn.execute(text(f'CREATE DATABASE "{self.db}" OWNER {self.owner}'))
        admin.dispose()
        base = server.url.replace("postgres@", "{}@")
        self.url = lambda role: f"{base.format(role)}/{self.db}"


@pytest.fixture(scope="module")
def fleet(pg_server):
    fleet = Fleet(pg_server)
    owner = fleet.url(fleet.owner)
    assert "row-level security in place" in cli("db", "init", "--db", owner)
    cli("db", "add-robot", "--db", owner, "--role", fleet.robot_a, "--identity", A)
    cli("db", "add-robot", "--db", owner, "--role", fleet.robot_b, "--identity", B)
    cli("db", "add-analyst", "--db", owner, "--role", fleet.analyst)
    for role, identity in ((fleet.robot_a, A), (fleet.robot_b, B)):
        store = MemoryStore(fleet.url(role))  # no DDL: the runtime role could not
        store.partition(identity).append_many(varied_events(200))
        consolidation_pass(store.partition(identity))
        store.close()
    return fleet


def run_as(url, statement):
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            return conn.execute(text(statement)).all() if statement.startswith("SELECT") \
                else conn.execute(text(statement)).rowcount
    finally:
        engine.dispose()


def test_every_identity_table_gets_row_level_security():
    names = {t.name for t in identity_tables()}
    assert {"events", "chain_heads", "semantic_facts", "consolidation_state",
            "verified_checkpoints", "request_ids"} <= names
    policies = "\n".join(security_statements())
    for name in names:
        assert f"CREATE POLICY robot_memory_own_rows ON {name} TO robot_memory_runtime" \
            in policies


def test_the_security_page_states_the_grants_applied():
    page = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    for table, privileges in RUNTIME_PRIVILEGES.items():
        assert f"GRANT {privileges} ON {table} TO robot_memory_runtime;" in page
    assert f"GRANT {DERIVED_PRIVILEGES} ON <table> TO robot_memory_runtime;" in page
    for statement in security_statements():
        if statement.startswith("GRANT") and "ON ALL SEQUENCES" in statement:
            assert statement in page


def test_the_core_paths_work_under_the_runtime_role(fleet):
    store = MemoryStore(fleet.url(fleet.robot_a))
    part = store.partition(A)
    assert store.identities() == [A]  # B's chain is invisible, not just filtered by code
    assert part.count_events("execution_result") == 200
    facts = part.facts()
    assert facts and all(f.n_observations > 0 for f in facts)
    answer = GroundingIndex(A, facts).lookup(GroundingRequest(skill_id="manipulation.grasp"))
    assert answer.facts and {f.id for f in answer.facts} <= {f.id for f in facts}
    store.close()
    verdict = check_store(fleet.url(fleet.robot_a), A, record=True)
    assert verdict.ok, verdict.lines
    assert check_store(fleet.url(fleet.robot_a), full=True).ok


FORBIDDEN = [
    "UPDATE events SET payload_json = '{}'",
    "DELETE FROM events",
    "TRUNCATE events",
    "ALTER TABLE events DISABLE TRIGGER USER",
    "ALTER TABLE events DISABLE ROW LEVEL SECURITY",
    "DROP TRIGGER events_refuse_change ON events",
    "DROP POLICY robot_memory_own_rows ON events",
    "DROP TABLE events",
    "CREATE OR REPLACE FUNCTION robot_memory_refuse_change() RETURNS trigger AS "
    "$$ BEGIN RETURN NEW; END; $$ LANGUAGE plpgsql",
    "CREATE TABLE events_copy (i int)",
    "DELETE FROM chain_heads",
    "UPDATE store_info SET value = '0'",
    f"INSERT INTO robot_roles VALUES (current_user, '{B}')",
    f"UPDATE robot_roles SET identity_hash = '{B}'",
    # Writing robot B's rows by hand: row-level security refuses the new row.
    f"INSERT INTO events (identity_hash, seq, kind, stamp_ns, payload_json, prev_hash, "
    f"event_hash) VALUES ('{B}', 999, 'k', 0, '{{}}', '{'0' * 64}', '{'1' * 64}')",
    f"INSERT INTO chain_heads VALUES ('{B}', 0, '{'0' * 64}')",
    f"UPDATE semantic_facts SET identity_hash = '{B}'",
    # An acknowledged request's answer is never rewritten, nor recorded for robot B.
    "UPDATE request_ids SET event_id = 0",
    f"INSERT INTO request_ids VALUES ('{B}', 'retry-1', 1, 1, '\\x00')",
    f"INSERT INTO semantic_facts (identity_hash, fact_kind, fact_key, fact_value_json, status, "
    f"confidence, n_observations, rule_version, last_supporting_event_id, last_updated_ns) "
    f"VALUES ('{B}', 'k', 'x', '{{}}', 'active', 1, 1, 'v', 1, 1)",
]


@pytest.mark.parametrize("statement", FORBIDDEN)
def test_the_runtime_role_is_refused(fleet, statement):
    with pytest.raises(DBAPIError) as info:
        run_as(fleet.url(fleet.robot_a), statement)
    assert info.value.orig.sqlstate == PERMISSION_DENIED, info.value.orig
    # Nothing moved: both chains intact, as the owner sees them.
    assert check_store(fleet.url(fleet.owner), full=True).ok


def test_becoming_another_robot_is_refused(fleet):
    with pytest.raises(DBAPIError) as info:
        run_as(fleet.url(fleet.robot_a), f"SET ROLE {fleet.robot_b}")
    assert info.value.orig.sqlstate == PERMISSION_DENIED
    # The group role is reachable, and maps to no identity at all.
    engine = create_engine(fleet.url(fleet.robot_a))
    with engine.begin() as conn:
        conn.execute(text("SET ROLE robot_memory_runtime"))
        assert conn.execute(text("SELECT count(*) FROM events")).scalar() == 0
    engine.dispose()


def test_robot_a_cannot_read_or_change_robot_b_rows_by_hand(fleet):
    url = fleet.url(fleet.robot_a)
    assert run_as(url, f"SELECT count(*) FROM events WHERE identity_hash = '{B}'") == [(0,)]
    assert run_as(url, "SELECT DISTINCT identity_hash FROM events") == [(A,)]
    assert run_as(url, "SELECT DISTINCT identity_hash FROM semantic_facts") == [(A,)]
    assert run_as(url, "SELECT role_name FROM robot_roles") == [(fleet.robot_a,)]
    # Derived tables are writable, but only A's rows are there to write.
    assert run_as(url, f"UPDATE semantic_facts SET confidence = 0 "
                       f"WHERE identity_hash = '{B}'") == 0
    assert run_as(url, f"DELETE FROM consolidation_state WHERE identity_hash = '{B}'") == 0
    b_facts = run_as(fleet.url(fleet.analyst),
                     f"SELECT count(*) FROM semantic_facts WHERE identity_hash = '{B}' "
                     "AND confidence > 0")
    assert b_facts[0][0] > 0


def test_the_analytics_role_reads_across_robots_and_writes_nothing(fleet):
    url = fleet.url(fleet.analyst)
    assert run_as(url, "SELECT identity_hash, count(*) FROM events GROUP BY 1 ORDER BY 1") \
        == [(A, 201), (B, 201)]  # 200 results and one consolidation_run each
    assert len(run_as(url, "SELECT role_name FROM robot_roles")) >= 2
    for statement in ("DELETE FROM semantic_facts", "UPDATE chain_heads SET seq = 0",
                      f"INSERT INTO chain_heads VALUES ('{'c' * 64}', 0, '{'0' * 64}')"):
        with pytest.raises(DBAPIError) as info:
            run_as(url, statement)
        assert info.value.orig.sqlstate == PERMISSION_DENIED


def test_acknowledged_requests_work_under_the_runtime_role_and_stay_private(fleet):
    """Near the end of this file: it appends to robot A's chain, which the tests above
    count."""
    store = MemoryStore(fleet.url(fleet.robot_a))
    ingest = Ingest(store.partition(A), flush_period_s=0.01)
    result = {"stamp_ns": 1, "skill_id": "navigation.dock", "success": True}
    first, retry = (ingest.record_event(ingest.take_request(
        dict, dict(result), "record_event", 2, "dock/attempt-1")).result(10) for _ in range(2))
    ingest.close()
    store.close()
    assert retry == Replayed(first.id, first.seq)
    assert run_as(fleet.url(fleet.robot_a), "SELECT count(*) FROM request_ids") == [(1,)]
    assert run_as(fleet.url(fleet.robot_b), "SELECT count(*) FROM request_ids") == [(0,)]


def test_the_intent_index_works_under_the_runtime_role_and_stays_private(fleet):
    """Last in this file (it appends to robot A's chain). The lineage of an intent under
    the runtime role: the append indexes it, the lookup reads it, and robot B sees none of
    robot A's rows."""
    from robot_memory.grounding.lineage import explain_intent
    store = MemoryStore(fleet.url(fleet.robot_a))
    partition = store.partition(A)
    event = result_event(5)
    partition.append_many([event._replace(payload={**event.payload, "intent_id": "pick-a"})])
    lineage = explain_intent(partition, "pick-a")
    store.close()
    assert [r["skill_id"] for r in lineage["results"]] == ["manipulation.grasp"]
    assert run_as(fleet.url(fleet.robot_a), "SELECT count(*) FROM intent_events") == [(1,)]
    assert run_as(fleet.url(fleet.robot_b), "SELECT count(*) FROM intent_events") == [(0,)]


def test_amendments_work_under_the_runtime_role_and_stay_private(fleet):
    """After the tests that count robot A's chain (it appends to it). An amendment held,
    its attempt, a later amendment: the runtime role inserts and updates the attempt and
    amendment rows through row-level security, and robot B sees none of them."""
    store = MemoryStore(fleet.url(fleet.robot_a))
    partition = store.partition(A)
    original = result_event(900, success=True)
    named = [original._replace(payload={**original.payload, "amends": "grasp-a"},
                               stamp_ns=original.stamp_ns + 10**9),
             original._replace(payload={**original.payload, "attempt_id": "grasp-a"}),
             original._replace(payload={**original.payload, "amends": "grasp-a",
                                        "success": False, "failure_reason": "broken"},
                               stamp_ns=original.stamp_ns + 2 * 10**9)]
    for event in named:
        partition.append_many([event])
    report = consolidation_pass(partition)
    store.close()
    assert {k: v for k, v in report.skipped.items() if k.startswith("amendment")} == {
        "amendment:applied": 1, "amendment:superseded": 1}
    assert run_as(fleet.url(fleet.robot_a), "SELECT count(*) FROM result_attempts") == [(1,)]
    assert run_as(fleet.url(fleet.robot_b),
                  "SELECT count(*) FROM result_amendments") == [(0,)]

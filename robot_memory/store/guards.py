"""Append-only, enforced by the database itself: UPDATE and DELETE (and, on PostgreSQL,
TRUNCATE) of the episodic log fail, whoever issues them. This is what stops a script, a
console or a bug from rewriting history.

One exception: a compaction (store/compacted.py) removes a range of the chain it has
archived, under a permit row it writes and deletes in the same transaction as its
`compaction` event. A delete outside a permit is refused here; one that got round the
triggers is found by verification, which counts the rows every compaction removed."""

from __future__ import annotations

from sqlalchemy import Connection

REFUSAL = "robot_memory: the episodic log is append-only"

SQLITE_GUARDS = [
    f"""CREATE TRIGGER IF NOT EXISTS events_refuse_update BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, '{REFUSAL} (UPDATE refused)'); END""",
    "DROP TRIGGER IF EXISTS events_refuse_delete",  # before compaction permits
    f"""CREATE TRIGGER IF NOT EXISTS events_refuse_delete_unpermitted BEFORE DELETE ON events
        WHEN NOT EXISTS (SELECT 1 FROM compaction_permits p
                         WHERE p.identity_hash = OLD.identity_hash
                         AND OLD.seq BETWEEN p.from_seq AND p.until_seq)
        BEGIN SELECT RAISE(ABORT, '{REFUSAL} (DELETE refused)'); END""",
]

# `%%`: psycopg reads `%` as a placeholder even in a statement without parameters.
_POSTGRESQL = [
    f"""CREATE OR REPLACE FUNCTION robot_memory_refuse_change() RETURNS trigger AS $$
        BEGIN
          IF TG_OP = 'DELETE' AND EXISTS (
              SELECT 1 FROM compaction_permits p WHERE p.identity_hash = OLD.identity_hash
              AND OLD.seq BETWEEN p.from_seq AND p.until_seq) THEN
            RETURN OLD;
          END IF;
          RAISE EXCEPTION '{REFUSAL} (%% refused)', TG_OP;
        END; $$ LANGUAGE plpgsql""",
    "DROP TRIGGER IF EXISTS events_refuse_change ON events",
    """CREATE TRIGGER events_refuse_change BEFORE UPDATE OR DELETE ON events
        FOR EACH ROW EXECUTE FUNCTION robot_memory_refuse_change()""",
    "DROP TRIGGER IF EXISTS events_refuse_truncate ON events",
    """CREATE TRIGGER events_refuse_truncate BEFORE TRUNCATE ON events
        FOR EACH STATEMENT EXECUTE FUNCTION robot_memory_refuse_change()""",
]


def install_append_only_guards(conn: Connection) -> None:
    """Create the triggers (idempotent) for this connection's dialect."""
    statements = {"sqlite": SQLITE_GUARDS, "postgresql": _POSTGRESQL}.get(conn.dialect.name)
    if statements is None:
        raise NotImplementedError(f"no append-only guard for {conn.dialect.name}")
    for statement in statements:
        conn.exec_driver_sql(statement)


def guards_installed(conn: Connection) -> bool:
    """PostgreSQL: are both triggers on events in place? (A runtime role that may not
    create them must not try when they are.) Always False on SQLite: its CREATE ... IF
    NOT EXISTS is cheap and needs no privilege."""
    if conn.dialect.name != "postgresql":
        return False
    found = conn.exec_driver_sql(
        "SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass('events') "
        "AND tgname IN ('events_refuse_change', 'events_refuse_truncate')").scalar()
    return found == 2

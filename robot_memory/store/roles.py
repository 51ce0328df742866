"""Least privilege on a shared PostgreSQL fleet store, and one robot per partition.

Three kinds of role:
- the owner (whoever runs `robot-memory db init`): owns the tables, the append-only
  triggers and their function, and the robot-to-identity map. Only it can alter,
  disable or drop them.
- `robot_memory_runtime` (no login), granted to one login role per robot: INSERT and
  SELECT on the log, the chain head and the derived tables, never UPDATE, DELETE or
  TRUNCATE of `events`, never DDL. Row-level security limits every table with an
  `identity_hash` column to the identities mapped to the login role in `robot_roles`,
  a table only the owner writes: a robot cannot choose its identity, not even with
  hand-written SQL (a session setting would let the client choose). The tables keyed by
  chain number (`chain_id`) are limited to the chains of those identities.
- `robot_memory_analytics` (no login), granted to analysts: SELECT across robots.
- `robot_memory_priors` (no login), granted to a robot's priors reader: SELECT on
  `semantic_facts` alone, and row-level security limits it to the identities whose
  registered embodiment (`robot_embodiments`, owner-written from the manifests) is that
  of the identity the reader is mapped to. It never reads events, consultations or any
  other table (docs/priors.md).

The tables that get row-level security are found from the schema metadata, so a table
added later gets it at the next `db init` without being listed here.
"""

from __future__ import annotations

import re

from sqlalchemy import Connection, Table, text

from robot_memory.errors import InputError
from robot_memory.store.schema import metadata

RUNTIME_ROLE = "robot_memory_runtime"
ANALYTICS_ROLE = "robot_memory_analytics"
PRIORS_ROLE = "robot_memory_priors"
EMBODIMENTS_TABLE = "robot_embodiments"
PRIORS_READ_POLICY = "robot_memory_priors_read"
PRIORS_TABLE = "semantic_facts"  # the only table a priors reader may read
# Runs as the owner (SECURITY DEFINER), so the policies below can ask which embodiments
# the calling role's mapped identities declare without the caller reading robot_roles.
EMBODIMENTS_OF = "robot_memory_embodiments_of"
_SAME_EMBODIMENT = (f"identity_hash IN (SELECT identity_hash FROM {EMBODIMENTS_TABLE} "
                    f"WHERE embodiment IN (SELECT {EMBODIMENTS_OF}(current_user::text)))")
ROBOT_ROLES_TABLE = "robot_roles"
OWN_ROWS_POLICY = "robot_memory_own_rows"
FLEET_READ_POLICY = "robot_memory_fleet_read"

# What the runtime role may do per table; any other table of the schema is derived
# knowledge (rebuilt from the log) and may be rewritten by the nodes.
RUNTIME_PRIVILEGES = {
    "events": "SELECT, INSERT",  # the log: append and read, nothing else
    "chain_heads": "SELECT, INSERT, UPDATE",  # the append moves the head
    "chains": "SELECT, INSERT",  # an identity's chain number, added by its first append
    "store_info": "SELECT",  # schema version, written by the owner
    # The index of the log's results (schema 2): appended with the events, never changed.
    "result_combos": "SELECT, INSERT",
    "result_facets": "SELECT, INSERT",
    "result_values": "SELECT, INSERT",
    # Its sums per block of the chain (schema 3): written once, by the append that fills
    # the block, never changed.
    "result_rollup": "SELECT, INSERT",
    "value_rollup": "SELECT, INSERT",
    # The acknowledged requests (schema 6): recorded with their event, never changed;
    # removed only with their event, by a compaction.
    "request_ids": "SELECT, INSERT, DELETE",
    # Sealed segments shipped to the fleet store (schema 7): a robot adds uploads and
    # reads its own back, never changes or removes one.
    "fleet_segments": "SELECT, INSERT",
    "fleet_segment_chunks": "SELECT, INSERT",
    # The intent index (schema 7): written with its event, never changed; removed only
    # with its event, by a compaction.
    "intent_events": "SELECT, INSERT, DELETE",
    # Amended attempts (schema 7): an attempt's row and an amendment's are updated as
    # later results decide its final outcome, and stay when compaction removes their
    # events; the signed rows are written with their event, never changed, and removed
    # only with it, by a compaction.
    "result_attempts": "SELECT, INSERT, UPDATE",
    "result_amendments": "SELECT, INSERT, UPDATE",
    "amendment_deltas": "SELECT, INSERT, DELETE",
    "amendment_delta_values": "SELECT, INSERT, DELETE",
}
DERIVED_PRIVILEGES = "SELECT, INSERT, UPDATE, DELETE"

_ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")

# Rows of `robot_roles` name the login role and the identity it may read and write.
_MAPPED = (f"identity_hash IN (SELECT identity_hash FROM {ROBOT_ROLES_TABLE} "
           "WHERE role_name = current_user::text)")
# The same for a table keyed by chain number: the chains of the mapped identities.
_MAPPED_CHAINS = f"chain_id IN (SELECT chain_id FROM chains WHERE {_MAPPED})"


class RoleError(InputError):
    """Raised for a role name that is not a plain lower-case identifier, an identity
    hash that is not 64 hex digits, or a database that is not PostgreSQL."""


def identity_tables() -> list[Table]:
    """Every table of the schema with an identity_hash or chain_id column (all get
    row-level security)."""
    return [t for t in metadata.sorted_tables if "identity_hash" in t.c or "chain_id" in t.c]


def _own_rows(table: Table) -> str:
    """The row-level security condition of the runtime role on one table."""
    return _MAPPED if "identity_hash" in table.c else _MAPPED_CHAINS


def runtime_privileges(table: str) -> str:
    return RUNTIME_PRIVILEGES.get(table, DERIVED_PRIVILEGES)


def security_statements() -> list[str]:
    """The exact GRANTs and policies `db init` applies (idempotent; printed by
    `robot-memory db init --print-sql`, quoted in docs/security.md)."""
    statements = [
        "REVOKE CREATE ON SCHEMA public FROM PUBLIC",
        f"CREATE TABLE IF NOT EXISTS {ROBOT_ROLES_TABLE} (role_name text PRIMARY KEY, "
        "identity_hash varchar(64) NOT NULL)",
        f"REVOKE ALL ON {ROBOT_ROLES_TABLE} FROM PUBLIC",
        f"GRANT SELECT ON {ROBOT_ROLES_TABLE} TO {RUNTIME_ROLE}, {ANALYTICS_ROLE}",
        f"ALTER TABLE {ROBOT_ROLES_TABLE} ENABLE ROW LEVEL SECURITY",
        f"DROP POLICY IF EXISTS {OWN_ROWS_POLICY} ON {ROBOT_ROLES_TABLE}",
        f"CREATE POLICY {OWN_ROWS_POLICY} ON {ROBOT_ROLES_TABLE} FOR SELECT TO {RUNTIME_ROLE} "
        "USING (role_name = current_user::text)",
        f"DROP POLICY IF EXISTS {FLEET_READ_POLICY} ON {ROBOT_ROLES_TABLE}",
        f"CREATE POLICY {FLEET_READ_POLICY} ON {ROBOT_ROLES_TABLE} FOR SELECT "
        f"TO {ANALYTICS_ROLE} USING (true)",
    ]
    statements += _priors_statements()
    for table in metadata.sorted_tables:
        name = table.name
        statements += [
            f"REVOKE ALL ON {name} FROM PUBLIC",
            f"GRANT {runtime_privileges(name)} ON {name} TO {RUNTIME_ROLE}",
            f"GRANT SELECT ON {name} TO {ANALYTICS_ROLE}",
        ]
    for table in identity_tables():
        name = table.name
        statements += [
            f"ALTER TABLE {name} ENABLE ROW LEVEL SECURITY",
            f"DROP POLICY IF EXISTS {OWN_ROWS_POLICY} ON {name}",
            f"CREATE POLICY {OWN_ROWS_POLICY} ON {name} TO {RUNTIME_ROLE} "
            f"USING ({_own_rows(table)}) WITH CHECK ({_own_rows(table)})",
            f"DROP POLICY IF EXISTS {FLEET_READ_POLICY} ON {name}",
            f"CREATE POLICY {FLEET_READ_POLICY} ON {name} FOR SELECT TO {ANALYTICS_ROLE} "
            "USING (true)",
        ]
    statements += [
        f"GRANT SELECT ON {PRIORS_TABLE} TO {PRIORS_ROLE}",
        f"DROP POLICY IF EXISTS {PRIORS_READ_POLICY} ON {PRIORS_TABLE}",
        f"CREATE POLICY {PRIORS_READ_POLICY} ON {PRIORS_TABLE} FOR SELECT TO {PRIORS_ROLE} "
        f"USING ({_SAME_EMBODIMENT})",
        f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {RUNTIME_ROLE}",
    ]
    return statements


def _priors_statements() -> list[str]:
    """The embodiment register, its lookup function and who may read them."""
    return [
        f"CREATE TABLE IF NOT EXISTS {EMBODIMENTS_TABLE} (identity_hash varchar(64) PRIMARY "
        "KEY, agent_id text NOT NULL, embodiment text NOT NULL)",
        f"REVOKE ALL ON {EMBODIMENTS_TABLE} FROM PUBLIC",
        f"GRANT SELECT ON {EMBODIMENTS_TABLE} TO {PRIORS_ROLE}, {ANALYTICS_ROLE}",
        f"ALTER TABLE {EMBODIMENTS_TABLE} ENABLE ROW LEVEL SECURITY",
        f"CREATE OR REPLACE FUNCTION {EMBODIMENTS_OF}(role_name text) RETURNS SETOF text "
        "LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$ "
        f"SELECT e.embodiment FROM {EMBODIMENTS_TABLE} e JOIN {ROBOT_ROLES_TABLE} r "
        "ON r.identity_hash = e.identity_hash WHERE r.role_name = $1 $$",
        f"REVOKE ALL ON FUNCTION {EMBODIMENTS_OF}(text) FROM PUBLIC",
        f"GRANT EXECUTE ON FUNCTION {EMBODIMENTS_OF}(text) TO {PRIORS_ROLE}",
        f"DROP POLICY IF EXISTS {PRIORS_READ_POLICY} ON {EMBODIMENTS_TABLE}",
        f"CREATE POLICY {PRIORS_READ_POLICY} ON {EMBODIMENTS_TABLE} FOR SELECT "
        f"TO {PRIORS_ROLE} USING (embodiment IN "
        f"(SELECT {EMBODIMENTS_OF}(current_user::text)))",
        f"DROP POLICY IF EXISTS {FLEET_READ_POLICY} ON {EMBODIMENTS_TABLE}",
        f"CREATE POLICY {FLEET_READ_POLICY} ON {EMBODIMENTS_TABLE} FOR SELECT "
        f"TO {ANALYTICS_ROLE} USING (true)",
    ]


def _check_postgresql(conn: Connection) -> None:
    if conn.dialect.name != "postgresql":
        raise RoleError(f"roles and row-level security need PostgreSQL, not "
                        f"{conn.dialect.name}")


def _check_role_name(role: str) -> str:
    if not _ROLE_NAME.match(role):
        raise RoleError(f"role name {role!r} must be a lower-case identifier "
                        "([a-z_][a-z0-9_]*, at most 63 characters)")
    return role


def _create_role(conn: Connection, role: str, login: bool, password: str | None) -> None:
    exists = conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role}).first()
    options = "LOGIN" if login else "NOLOGIN"
    if password is not None:
        options += " PASSWORD '" + password.replace("'", "''") + "'"
    verb = "ALTER" if exists else "CREATE"
    conn.exec_driver_sql(f"{verb} ROLE {role} {options}".replace("%", "%%"))


def init_security(conn: Connection) -> None:
    """Create the group roles, the robot map, the GRANTs and the row-level security.
    Run as the owner of the schema (after the tables exist)."""
    _check_postgresql(conn)
    for role in (RUNTIME_ROLE, ANALYTICS_ROLE, PRIORS_ROLE):
        _create_role(conn, role, login=False, password=None)
    for statement in security_statements():
        conn.exec_driver_sql(statement)


def add_robot_role(conn: Connection, role: str, identity_hash: str,
                   password: str | None = None) -> None:
    """A login role for one robot, a member of the runtime role, mapped to its identity."""
    _check_postgresql(conn)
    _check_role_name(role)
    if not _HEX64.match(identity_hash):
        raise RoleError(f"identity hash {identity_hash!r} is not 64 lower-case hex digits")
    _create_role(conn, role, login=True, password=password)
    conn.exec_driver_sql(f"GRANT {RUNTIME_ROLE} TO {role}")
    conn.execute(text(f"INSERT INTO {ROBOT_ROLES_TABLE} (role_name, identity_hash) "
                      "VALUES (:r, :i) ON CONFLICT (role_name) DO UPDATE "
                      "SET identity_hash = EXCLUDED.identity_hash"),
                 {"r": role, "i": identity_hash})


def register_embodiment(conn: Connection, identity_hash: str, agent_id: str,
                        embodiment: str) -> None:
    """Record the embodiment an identity's manifest declares (the caller hashed the
    manifest): what decides whose facts a priors reader sees. An identity's manifest
    never changes, so a second registration of it changes nothing."""
    _check_postgresql(conn)
    conn.execute(text(f"INSERT INTO {EMBODIMENTS_TABLE} (identity_hash, agent_id, embodiment) "
                      "VALUES (:i, :a, :e) ON CONFLICT (identity_hash) DO NOTHING"),
                 {"i": identity_hash, "a": agent_id, "e": embodiment})


def add_priors_reader(conn: Connection, role: str, identity_hash: str,
                      password: str | None = None) -> None:
    """A login role that reads, as priors for the robot of `identity_hash`, the facts of
    the other identities registered with the same embodiment, and nothing else. A robot's
    own login role may be given it too, but never remapped to another identity."""
    _check_postgresql(conn)
    _check_role_name(role)
    if not _HEX64.match(identity_hash):
        raise RoleError(f"identity hash {identity_hash!r} is not 64 lower-case hex digits")
    mapped = conn.execute(text(f"SELECT identity_hash FROM {ROBOT_ROLES_TABLE} "
                               "WHERE role_name = :r"), {"r": role}).scalar()
    if mapped is not None and mapped != identity_hash:
        raise RoleError(f"role {role} is mapped to identity {mapped}, not {identity_hash}")
    _create_role(conn, role, login=True, password=password)
    conn.exec_driver_sql(f"GRANT {PRIORS_ROLE} TO {role}")
    conn.execute(text(f"INSERT INTO {ROBOT_ROLES_TABLE} (role_name, identity_hash) "
                      "VALUES (:r, :i) ON CONFLICT (role_name) DO NOTHING"),
                 {"r": role, "i": identity_hash})


def add_analyst_role(conn: Connection, role: str, password: str | None = None) -> None:
    """A login role that reads every robot's rows and writes nothing."""
    _check_postgresql(conn)
    _check_role_name(role)
    _create_role(conn, role, login=True, password=password)
    conn.exec_driver_sql(f"GRANT {ANALYTICS_ROLE} TO {role}")

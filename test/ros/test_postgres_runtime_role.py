"""The whole stack logging in as a robot's runtime role on a fleet database set up by
an ordinary owner role (`robot-memory db init`): no DDL at open, and the nodes log,
consolidate and ground as usual under row-level security."""

import uuid

import pytest
from ros import test_pipeline
from sqlalchemy import create_engine, text

from robot_memory.store import MemoryStore
from robot_memory.store.roles import add_robot_role, init_security


@pytest.fixture
def db_url(pg_server, certified_hash):
    suffix = uuid.uuid4().hex[:8]
    owner, robot, name = f"rm_owner_{suffix}", f"robot_{suffix}", f"rm_fleet_{suffix}"
    admin = create_engine(f"{pg_server.url}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE ROLE {owner} LOGIN CREATEROLE"))
        conn.execute(text(f'CREATE DATABASE "{name}" OWNER {owner}'))
    admin.dispose()
    as_role = pg_server.url.replace("postgres@", "{}@") + f"/{name}"
    store = MemoryStore(as_role.format(owner))
    with store.write() as conn:
        init_security(conn)
        add_robot_role(conn, robot, certified_hash)
    store.close()
    return as_role.format(robot)


test_results_become_facts_under_the_runtime_role = \
    test_pipeline.test_results_become_facts_the_planner_can_ground_on

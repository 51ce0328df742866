"""Fleet priors on a real PostgreSQL server: a priors reader sees the facts of the robots
registered with its robot's embodiment, never another embodiment's, never any event or
other table, and the database (row-level security) enforces it, not the query."""

import pytest
from sqlalchemy.exc import DBAPIError
from test_postgres_roles import PERMISSION_DENIED, Fleet, cli, run_as

from helpers import varied_events, write_manifest
from robot_memory.consolidation.consolidation_pass import consolidation_pass
from robot_memory.grounding.index import PRIOR, GroundingIndex, GroundingRequest
from robot_memory.manifest import load_manifest
from robot_memory.grounding.priors import PriorIndex
from robot_memory.grounding.priors_sources import FLEET_ORIGIN, fleet_priors, load_priors
from robot_memory.store import MemoryStore

ARM, OTHER = "ur5e+robotiq_2f85", "franka_panda"


@pytest.fixture(scope="module")
def fleet(pg_server, tmp_path_factory):
    """Robots a (new), b (same arm, experienced) and c (another arm, experienced); a's
    priors reader."""
    fleet = Fleet(pg_server)
    owner = fleet.url(fleet.owner)
    cli("db", "init", "--db", owner)
    folder = tmp_path_factory.mktemp("manifests")
    fleet.identity, fleet.role = {}, {}
    for name, embodiment in (("a", ARM), ("b", ARM), ("c", OTHER)):
        path = write_manifest(folder, f"arm-{name}", embodiment)
        fleet.identity[name] = load_manifest(path).identity_hash()
        fleet.role[name] = f"robot_{name}_{fleet.db[-8:]}"
        out = cli("db", "add-robot", "--db", owner, "--role", fleet.role[name],
                  "--manifest", str(path))
        assert f"embodiment '{embodiment}' registered" in out
        if name == "a":
            fleet.manifest_a = path
    fleet.reader = f"priors_a_{fleet.db[-8:]}"
    out = cli("db", "add-priors-reader", "--db", owner, "--role", fleet.reader,
              "--manifest", str(fleet.manifest_a))
    assert f"priors reader {fleet.reader} reads the facts of identity " \
           f"{fleet.identity['a']}'s siblings" in out
    for name in ("b", "c"):
        store = MemoryStore(fleet.url(fleet.role[name]))
        part = store.partition(fleet.identity[name])
        part.append_many(varied_events(200))
        consolidation_pass(part)
        store.close()
    return fleet


def test_the_reader_gets_the_same_embodiments_facts_only(fleet):
    facts = fleet_priors(fleet.url(fleet.reader), fleet.identity["a"], ARM)
    assert facts and {(f.identity_hash, f.agent_id, f.origin) for f in facts} == \
        {(fleet.identity["b"], "arm-b", FLEET_ORIGIN)}
    assert all(f.fact.kind == "skill_success_rate" and f.fact.status == "active"
               for f in facts)
    index = GroundingIndex(fleet.identity["a"], [])
    target = facts[0].fact.value["target_class"]
    answer = index.lookup(GroundingRequest("manipulation.grasp", target, allow_priors=True),
                          priors=PriorIndex(facts))
    assert answer.status == PRIOR
    assert {s.identity_hash for p in answer.priors for s in p.sources} == {fleet.identity["b"]}


def test_the_database_not_the_query_keeps_other_embodiments_out(fleet):
    url = fleet.url(fleet.reader)
    # Hand-written SQL, no filter: row-level security still returns robot b's facts alone
    # (a, the same arm, has none yet).
    assert run_as(url, "SELECT DISTINCT identity_hash FROM semantic_facts") == \
        [(fleet.identity["b"],)]
    assert run_as(url, f"SELECT count(*) FROM semantic_facts WHERE identity_hash = "
                       f"'{fleet.identity['c']}'") == [(0,)]
    assert run_as(url, "SELECT embodiment FROM robot_embodiments") == [(ARM,), (ARM,)]
    # Asking for the other embodiment by name finds nothing either.
    assert fleet_priors(url, fleet.identity["a"], OTHER) == []
    # The owner sees that c's facts exist: the filter above is the policy's doing.
    c_facts = f"SELECT count(*) > 0 FROM semantic_facts WHERE " \
              f"identity_hash = '{fleet.identity['c']}'"
    assert run_as(fleet.url(fleet.owner), c_facts) == [(True,)]


@pytest.mark.parametrize("statement", [
    "SELECT count(*) FROM events",
    "SELECT count(*) FROM chain_heads",
    "SELECT count(*) FROM consolidation_state",
    "SELECT count(*) FROM result_facets",
    "SELECT count(*) FROM robot_roles",
    "UPDATE semantic_facts SET confidence = 0",
    "DELETE FROM semantic_facts",
    "INSERT INTO robot_embodiments VALUES ('" + "d" * 64 + f"', 'x', '{OTHER}')",
    "UPDATE robot_embodiments SET embodiment = 'franka_panda'",
])
def test_the_reader_reads_facts_and_nothing_else(fleet, statement):
    with pytest.raises(DBAPIError) as info:
        run_as(fleet.url(fleet.reader), statement)
    assert info.value.orig.sqlstate == PERMISSION_DENIED, info.value.orig


def test_a_robot_login_without_the_priors_role_reads_no_sibling(fleet):
    url = fleet.url(fleet.role["a"])
    assert run_as(url, f"SELECT count(*) FROM semantic_facts WHERE identity_hash = "
                       f"'{fleet.identity['b']}'") == [(0,)]


def test_an_unreachable_fleet_store_is_refused_with_the_url_and_no_password(fleet):
    bad = fleet.url(fleet.reader).replace(fleet.reader, f"{fleet.reader}:secret") \
        .rsplit("/", 1)[0] + "/no_such_db"
    loaded = load_priors([bad], fleet.identity["a"], ARM)
    assert loaded.facts == [] and len(loaded.refused) == 1
    assert "no_such_db" in loaded.refused[0] and "secret" not in loaded.refused[0]

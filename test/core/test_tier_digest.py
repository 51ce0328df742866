"""The served tier is as tamper-evident as the log: each consolidation run records a
digest of the facts and states it leaves; the boot check holds the stored rows to it,
`verify` names the first row that differs and `verify --full` re-derives the whole tier
from the log. On a real SQLite file and on a real PostgreSQL server, rows edited,
deleted and inserted behind the store's back, the way the log's own tamper tests edit
events; and a robot's normal life (passes, overrides, reset, compaction, restarts) that
never trips it."""

import sqlite3
import subprocess
import sys

import oracle_consolidation
import pytest
from helpers import result_event, varied_events
from sqlalchemy import create_engine

from robot_memory.retention.compaction import compact
from robot_memory.consolidation import ConcurrentPass, RulesConfig, consolidation_pass
from robot_memory.consolidation.consolidation_pass import commit, plan_pass
from robot_memory.consolidation.overrides import (record_freeze, record_invalidation,
                                                  record_operator_fact, record_reset)
from robot_memory.store import MemoryStore, check_store, check_tier
from robot_memory.consolidation.tier_audit import locate_difference, rederive

IDENT = "d" * 64
OTHER = "e" * 64


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'memory.db'}"
    return request.getfixturevalue("pg_url")


def raw(url, *statements):
    """Statements run around robot_memory's code: a console or a script with the
    database's credentials (or write access to the file)."""
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        rows = [conn.execute(s).fetchall() for s in statements]
        conn.commit()
        conn.close()
        return rows
    engine = create_engine(url)
    with engine.begin() as conn:  # the driver reads % as a placeholder: doubled
        results = [conn.exec_driver_sql(s.replace("%", "%%")) for s in statements]
        rows = [r.fetchall() if r.returns_rows else None for r in results]
    engine.dispose()
    return rows


def consolidated(url):
    """A store after several passes: a full one, incremental ones, an operator's fact."""
    store = MemoryStore(url)
    part = store.partition(IDENT)
    stream = varied_events(600)
    part.append_many(stream[:400])
    consolidation_pass(part)
    part.append_many(stream[400:450])
    consolidation_pass(part)
    record_operator_fact(part, "ops", "measured", "object_property", "object_3",
                         {"target_class": "object_3", "property": "mass_kg",
                          "band": {"median": 0.25}}, 0.9, 10**12)
    part.append_many(stream[450:])
    consolidation_pass(part)
    store.partition(OTHER).append_many([result_event(i, target="red_mug") for i in range(8)])
    consolidation_pass(store.partition(OTHER))
    assert check_store(url, IDENT, record=True).ok
    store.close()
    return url


def fact_row(url, kind, key_like="%"):
    return raw(url, f"SELECT id, fact_key FROM semantic_facts WHERE identity_hash = '{IDENT}' "
                    f"AND fact_kind = '{kind}' AND fact_key LIKE '{key_like}' ORDER BY id")[0][0]


def boot_verdict(url):
    verdict = check_store(url, IDENT, record=True)
    return verdict, " ".join(verdict.lines)


def audits(url):
    store = MemoryStore(url)
    part = store.partition(IDENT)
    try:
        return locate_difference(part), rederive(part)
    finally:
        store.close()


def test_an_edited_fact_halts_the_boot_check_and_is_named(url):
    consolidated(url)
    row_id, key = fact_row(url, "skill_success_rate")
    # recommended force 25 -> 80 N, confidence 0.99
    raw(url, f"UPDATE semantic_facts SET fact_value_json = replace(fact_value_json, '25.0', "
             f"'80.0'), confidence = 0.99 WHERE id = {row_id}")
    verdict, text = boot_verdict(url)
    assert not verdict.ok
    assert "semantic tier differs" in text and "table semantic_facts" in text
    assert "consolidation_state" not in text  # the states are intact
    located, full = audits(url)
    for audit in (located, full):
        assert not audit.ok
        first = audit.first
        assert (first.table, first.kind, first.key, first.row_id) == \
            ("semantic_facts", "skill_success_rate", key, row_id)
        assert first.what.startswith("edited")
    assert check_store(url, OTHER).ok  # another identity's tier is not concerned


def test_an_edited_state_is_named(url):
    consolidated(url)
    key = raw(url, f"SELECT fact_key FROM consolidation_state WHERE identity_hash = '{IDENT}' "
                   "AND fact_kind = 'zone_risk' ORDER BY fact_key")[0][0][0]
    raw(url, "UPDATE consolidation_state SET state_json = replace(state_json, '\"n\":', "
             f"'\"n\":1') WHERE identity_hash = '{IDENT}' AND fact_kind = 'zone_risk' "
             f"AND fact_key = '{key}'")
    verdict, text = boot_verdict(url)
    assert not verdict.ok and "table consolidation_state" in text
    assert "table semantic_facts" not in text
    located, full = audits(url)
    for audit in (located, full):
        assert not audit.ok
        assert (audit.first.table, audit.first.kind, audit.first.key) == \
            ("consolidation_state", "zone_risk", key)


def test_a_deleted_fact_is_named(url):
    consolidated(url)
    row_id, key = fact_row(url, "interaction_pattern")
    raw(url, f"DELETE FROM semantic_facts WHERE id = {row_id}")
    verdict, text = boot_verdict(url)
    assert not verdict.ok and "table semantic_facts" in text
    located, full = audits(url)
    for audit in (located, full):
        assert (audit.first.kind, audit.first.key, audit.first.row_id) == \
            ("interaction_pattern", key, None)
        assert audit.first.what.startswith("deleted")


def test_an_inserted_fact_is_named(url):
    consolidated(url)
    raw(url, "INSERT INTO semantic_facts (identity_hash, fact_kind, fact_key, fact_value_json, "
             "status, confidence, n_observations, rule_version, last_supporting_event_id, "
             f"last_updated_ns) VALUES ('{IDENT}', 'skill_success_rate', "
             "'manipulation.grasp + knife + sim', '{\"success_rate\":1.0}', 'active', 0.99, 50, "
             "'v1.0', 1, 1)")
    row_id, _ = fact_row(url, "skill_success_rate", "%knife%")
    verdict, text = boot_verdict(url)
    assert not verdict.ok and "table semantic_facts" in text
    located, full = audits(url)
    for audit in (located, full):
        assert (audit.first.key, audit.first.row_id) == ("manipulation.grasp + knife + sim",
                                                         row_id)
        assert audit.first.what.startswith("inserted")


def test_a_pass_after_the_edit_does_not_launder_it(tmp_path):
    url = consolidated(f"sqlite:///{tmp_path / 'memory.db'}")
    row_id, _ = fact_row(url, "skill_success_rate")
    raw(url, f"UPDATE semantic_facts SET confidence = 0.99 WHERE id = {row_id}")
    store = MemoryStore(url)
    part = store.partition(IDENT)
    part.append_many(varied_events(700)[600:])  # touches the edited fact's group again
    consolidation_pass(part)
    store.close()
    assert not check_store(url, IDENT).ok


def test_verify_names_the_row_from_the_command_line(tmp_path):
    url = consolidated(f"sqlite:///{tmp_path / 'memory.db'}")
    row_id, key = fact_row(url, "object_property")
    raw(url, f"UPDATE semantic_facts SET n_observations = n_observations + 1 WHERE id = {row_id}")
    for flags in ([], ["--full"]):
        done = subprocess.run([sys.executable, "-m", "robot_memory.cli", "verify", "--db", url,
                               "--identity", IDENT, *flags],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, done.stdout + done.stderr
        assert f"fact object_property|{key} (semantic_facts.id {row_id}): edited" in done.stdout
        assert "STORE CORRUPTED" in done.stdout


def test_after_a_compaction_verify_points_to_the_archives(tmp_path):
    url = consolidated(f"sqlite:///{tmp_path / 'memory.db'}")
    store = MemoryStore(url)
    part = store.partition(IDENT)
    archives = tmp_path / "segments"
    compact(part, part.head()[0], archives)
    raw(url, f"UPDATE consolidation_state SET state_json = replace(state_json, '\"n\":', "
             f"'\"n\":1') WHERE identity_hash = '{IDENT}' AND fact_kind = 'zone_risk'")
    assert not check_store(url, IDENT).ok
    located = locate_difference(part)
    assert located.first is None and "--full --archives DIR" in located.describe()
    assert "not re-derived" in rederive(part).describe()
    full = rederive(part, archive_dir=archives)
    assert not full.ok and full.first.table == "consolidation_state"
    store.close()


def test_a_normal_life_never_trips_it(url, tmp_path):
    """Passes full and incremental, cut anywhere, a dry run, a pass that lost a race,
    overrides of every kind, a reset, compactions and restarts: the boot check passes
    after each, and the tier re-derived from the log equals the stored one, byte for
    byte (after compactions, from the archive segments)."""
    archives = tmp_path / "segments"
    stream = varied_events(900)

    def holds(part):
        verdict = check_store(url, IDENT, record=True)
        assert verdict.ok and verdict.tiers[0].attested, verdict.lines
        audit = rederive(part, archive_dir=archives)
        assert audit.ok, audit.describe()

    store = MemoryStore(url)
    part = store.partition(IDENT)
    holds(part)  # no pass yet
    # Another robot's events in between: event ids and chain positions part ways, which
    # the re-derivation from a scratch store of the archived history must map back.
    store.partition(OTHER).append_many([result_event(i, target="red_mug") for i in range(40)])
    part.append_many(stream[:300])
    consolidation_pass(part, max_events=120)
    consolidation_pass(part)
    holds(part)
    part.append_many(stream[300:320])
    consolidation_pass(part, apply=False)  # a dry run writes nothing
    inputs, report, result = plan_pass(part, RulesConfig())
    consolidation_pass(part)  # commits first: the planned pass has lost the race
    with pytest.raises(ConcurrentPass):
        commit(part, inputs, report, result)
    holds(part)
    fact = next(f for f in part.facts() if f.kind == "skill_success_rate")
    record_invalidation(part, "ops", "suspect", fact, 10**12)
    record_operator_fact(part, "ops", "measured", "object_property", "object_7",
                         {"target_class": "object_7", "property": "mass_kg",
                          "band": {"median": 1.5}}, 0.95, 10**12)
    consolidation_pass(part)
    holds(part)
    record_freeze(part, "ops", "audit", True, 10**12)
    part.append_many(stream[320:400])
    consolidation_pass(part)
    record_freeze(part, "ops", "audit done", False, 10**12)
    consolidation_pass(part)
    holds(part)
    compact(part, part.head()[0], archives)
    store.partition(OTHER).append_many([result_event(i, target="red_mug") for i in range(9)])
    part.append_many(stream[400:500])
    consolidation_pass(part)
    holds(part)
    store.close()  # a restart
    store = MemoryStore(url)
    part = store.partition(IDENT)
    holds(part)
    record_reset(part, "ops", "start over", 10**12, tmp_path / "reset_archive.json")
    part.append_many(stream[500:700])
    consolidation_pass(part)
    holds(part)
    compact(part, part.head()[0], archives)
    part.append_many(stream[700:])
    consolidation_pass(part)
    holds(part)
    store.close()


def test_a_store_written_before_tier_digests_is_attested_by_its_next_pass(tmp_path):
    """Runs without a digest (an older release's): the boot check says the tier is not
    attested yet and passes; the next pass hashes the stored tier whole, once, and from
    then on the tier is held to its digest."""
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    store = MemoryStore(url)
    part = store.partition(IDENT)
    part.append_many(varied_events(200))
    oracle_consolidation.consolidation_pass(part, record_digest=False)  # as releases before
    verdict = check_store(url, IDENT)
    assert verdict.ok and not verdict.tiers[0].attested
    assert "predates tier digests" in " ".join(verdict.lines)
    part.append_many(varied_events(260)[200:])
    consolidation_pass(part)
    report = check_tier(part)
    assert report.ok and report.attested and report.facts > 0
    assert rederive(part).ok
    store.close()


@pytest.mark.parametrize("compacted", [False, True])
def test_damaged_rows_are_named_without_a_crash(tmp_path, compacted):
    """Rows no pass could write (a state that is not a rule's, a confidence that is not a
    number) are hashed, found and named like any edit; nothing raises."""
    url = consolidated(f"sqlite:///{tmp_path / 'memory.db'}")
    archives = tmp_path / "segments"
    if compacted:
        store = MemoryStore(url)
        compact(store.partition(IDENT), store.partition(IDENT).head()[0], archives)
        store.close()
    row_id, key = fact_row(url, "zone_risk")
    raw(url, f"UPDATE semantic_facts SET confidence = 'high' WHERE id = {row_id}",
        "UPDATE consolidation_state SET state_json = '{\"n\":\"many\"}' WHERE identity_hash = "
        f"'{IDENT}' AND fact_kind = 'skill_success_rate'")
    verdict, text = boot_verdict(url)
    assert not verdict.ok
    assert "table semantic_facts" in text and "table consolidation_state" in text
    store = MemoryStore(url)
    part = store.partition(IDENT)
    located = locate_difference(part)
    full = rederive(part, archive_dir=archives)
    store.close()
    assert not located.ok and not full.ok
    assert full.first.table == "consolidation_state"
    if compacted:
        assert "--full --archives DIR" in located.describe()
    else:
        assert located.first.table == "consolidation_state"
        assert f"fact zone_risk|{key} (semantic_facts.id {row_id}): edited" in \
            located.describe()

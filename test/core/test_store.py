import sqlite3

import pytest

from robot_memory.store import MemoryStore, NewEvent, verify_chain

A, B = "a" * 64, "b" * 64


def test_append_builds_a_per_identity_chain(db_url):
    store = MemoryStore(db_url)
    a, b = store.partition(A), store.partition(B)
    first = a.append("execution_result", {"x": 1}, 10)
    b.append("execution_result", {"x": 2}, 11)
    second = a.append("execution_result", {"x": 3}, 12)
    assert (first.seq, second.seq) == (1, 2)
    assert second.prev_hash == first.event_hash
    assert [e.payload for e in a.events()] == [{"x": 1}, {"x": 3}]
    assert [e.payload for e in b.events()] == [{"x": 2}]
    assert verify_chain(a).ok and verify_chain(b).ok
    assert store.identities() == [A, B]


def test_events_are_read_in_batches_in_order(db_url):
    part = MemoryStore(db_url).partition(A)
    part.append_many([NewEvent("k", {"i": i}, i) for i in range(25)])
    assert [e.payload["i"] for e in part.events(batch_size=7)] == list(range(25))
    assert [e.seq for e in part.events(after_seq=20)] == [21, 22, 23, 24, 25]


def _raw(db_url):
    return sqlite3.connect(db_url.removeprefix("sqlite:///"))


def _bypassing_guards(db_url):
    """A raw connection with the append-only triggers dropped: how an attacker or a
    broken tool would have to edit the log (MemoryStore recreates them on open)."""
    conn = _raw(db_url)
    conn.execute("DROP TRIGGER IF EXISTS events_refuse_update")
    conn.execute("DROP TRIGGER IF EXISTS events_refuse_delete_unpermitted")
    return conn


@pytest.mark.parametrize("statement", ["UPDATE events SET payload_json='{}' WHERE seq=1",
                                       "DELETE FROM events WHERE seq=1",
                                       "DELETE FROM events"])
def test_the_database_refuses_to_rewrite_the_log(db_url, statement):
    part = MemoryStore(db_url).partition(A)
    part.append_many([NewEvent("k", {"i": i}, i) for i in range(3)])
    with _raw(db_url) as conn, pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute(statement)
    assert [e.payload["i"] for e in part.events()] == [0, 1, 2]
    assert verify_chain(part).ok


def test_verify_names_the_first_edited_event(db_url):
    part = MemoryStore(db_url).partition(A)
    part.append_many([NewEvent("k", {"i": i}, i) for i in range(5)])
    with _bypassing_guards(db_url) as conn:
        conn.execute("UPDATE events SET payload_json='{\"i\":99}' WHERE seq=3")
    report = verify_chain(part)
    assert not report.ok and report.bad_seq == 3
    assert "edited" in report.reason


def test_verify_detects_deleted_and_truncated_events(db_url):
    part = MemoryStore(db_url).partition(A)
    part.append_many([NewEvent("k", {"i": i}, i) for i in range(5)])
    with _bypassing_guards(db_url) as conn:
        conn.execute("DELETE FROM events WHERE seq=5")
    report = verify_chain(part)
    assert not report.ok and "truncated" in report.reason
    with _bypassing_guards(db_url) as conn:
        conn.execute("DELETE FROM events WHERE seq=2")
    report = verify_chain(part)
    assert not report.ok and report.bad_seq == 2 and "missing" in report.reason


def test_store_reopens_and_continues_the_chain(db_url):
    MemoryStore(db_url).partition(A).append("k", {}, 1)
    part = MemoryStore(db_url).partition(A)
    assert part.append("k", {}, 2).seq == 2
    assert verify_chain(part).ok


def _result(skill: str, success: bool, force: float) -> dict:
    return {"skill_id": skill, "target_class": "cup", "environment": "lab", "zone": "",
            "parameters": {"force_n": force}, "observations": {}, "success": success,
            "failure_reason": "" if success else "slipped", "duration_s": 1.0,
            "intent_id": "", "notes": ""}


def test_two_writers_of_one_identity_share_result_combinations(db_url):
    """Each process caches combination ids; one added by the other process meanwhile is
    found, never inserted twice, and every facet row points at its own combination."""
    first, second = MemoryStore(db_url), MemoryStore(db_url)
    one, two = first.partition(A), second.partition(A)
    one.append_many([NewEvent("execution_result", _result("grasp", True, 1.0), 1)])
    two.append_many([NewEvent("execution_result", _result("grasp", False, 2.0), 2),
                     NewEvent("execution_result", _result("place", True, 3.0), 3)])
    one.append_many([NewEvent("execution_result", _result(skill, ok, 4.0), 4)
                     for skill, ok in (("grasp", False), ("place", True), ("push", True))])
    two.append_many([NewEvent("execution_result", _result("push", True, 5.0), 5)])
    first.close(), second.close()
    db = sqlite3.connect(db_url.removeprefix("sqlite:///"))
    combos = db.execute("SELECT skill_id, success, count(*) FROM result_combos "
                        "GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
    assert combos == [("grasp", 0, 1), ("grasp", 1, 1), ("place", 1, 1), ("push", 1, 1)]
    facets = db.execute("SELECT e.payload_json, c.skill_id, c.success FROM result_facets f "
                        "JOIN events e ON e.id = f.event_id "
                        "JOIN result_combos c ON c.combo_id = f.combo_id "
                        "ORDER BY f.seq").fetchall()
    assert len(facets) == 7
    for payload_json, skill, success in facets:
        assert f'"skill_id":"{skill}"' in payload_json
        assert f'"success":{"true" if success else "false"}' in payload_json


def _rows(url: str, table: str) -> list[tuple]:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        return conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()


def test_a_payload_given_as_decoded_is_stored_and_returned_exactly_as_one_decoded(tmp_path):
    """as_decoded only skips decoding the stored bytes again: the same rows, hashes,
    facets and returned events as an append that decodes them."""
    from robot_memory.intake.records import validate_record

    records = [validate_record({"stamp_ns": i, "skill_id": "manipulation.grasp",
                                "target_class": f"cup_{i % 3}", "success": i % 2 == 0,
                                "failure_reason": "" if i % 2 == 0 else "slipped",
                                "parameters": {"force_n": 20.0 + i, "neg_zero": -0.0},
                                "observations": {"mass_kg": 0.25} if i % 3 else {},
                                "notes": "é"}) for i in range(12)]
    made = {"decodes": lambda r: NewEvent("execution_result", r.payload(), r.stamp_ns),
            "as_decoded": lambda r: NewEvent("execution_result", r.payload(), r.stamp_ns,
                                             as_decoded=True),
            # checked: also read without checking the payload again (facets_of_checked), as
            # the intake's admission makes them
            "checked": lambda r: NewEvent("execution_result", r.payload(), r.stamp_ns,
                                          as_decoded=True, checked_result=True)}
    stored = {}
    for name, make in made.items():
        url = f"sqlite:///{tmp_path / f'{name}.db'}"
        part = MemoryStore(url).partition(A)
        stored[name] = (part.append_many([make(r) for r in records]),
                        *(_rows(url, t) for t in ("events", "result_facets",
                                                  "result_values", "result_combos")))
        assert verify_chain(part).ok
    assert stored["as_decoded"] == stored["decodes"] == stored["checked"]


def test_facets_of_odd_payloads_match_those_of_the_record_reader():
    """The facets of any payload are those record_from_payload's reading gives (the
    fast path only skips building the record)."""
    from robot_memory.intake.records import InvalidRecord, record_from_payload
    from robot_memory.store.facets import OBSERVATION, PARAMETER, facets_of_payload

    def reference(payload):
        try:
            r = record_from_payload(payload, 5)
        except InvalidRecord as exc:
            return ("", "", "", "", 0, "", 0, exc.reason), []
        values = [(PARAMETER, n, repr(float(v))) for n, v in r.parameters.items()]
        values += [(OBSERVATION, n, repr(float(v))) for n, v in r.observations.items()]
        return (r.skill_id, r.target_class, r.environment, r.zone, int(r.success),
                r.failure_reason, int(bool(r.observations)), ""), values

    good = {"skill_id": "s", "success": False, "target_class": "t", "failure_reason": "f",
            "parameters": {"a": 1, "b": -0.0}, "observations": {"m": 2.5}}
    odd = [good, {}, {"skill_id": "s"}, {**good, "skill_id": ""}, {**good, "success": 1},
           {**good, "zone": 3}, {**good, "notes": None}, {**good, "parameters": [1]},
           {**good, "observations": {"m": float("nan")}}, {**good, "parameters": {"a": "1"}},
           {**good, "parameters": {"a": True}}, {"skill_id": "s", "success": True}]
    for payload in odd:
        assert facets_of_payload(payload, 5) == reference(payload), payload


def test_facets_of_a_validated_record_are_those_of_its_checked_reading():
    """facets_of_checked skips the checks only: for any record validation accepts, it
    reads what facets_of_payload reads (ints made floats, -0.0 kept apart from 0.0)."""
    from robot_memory.intake.records import validate_record
    from robot_memory.store.facets import facets_of_checked, facets_of_payload

    base = {"stamp_ns": 1, "skill_id": "manipulation.grasp", "success": True}
    for changes in ({}, {"parameters": {"f": 1.0, "z": -0.0, "big": 1e300}},
                    {"parameters": {"i": 3}, "duration_s": 2},  # ints: pydantic's path
                    {"observations": {"m": 0.25}, "success": False, "failure_reason": "slip"},
                    {"target_class": "cup", "environment": "sim", "zone": "é",
                     "parameters": {"f": 3.0}, "observations": {}}):
        payload = validate_record({**base, **changes}).payload()
        assert facets_of_checked(payload) == facets_of_payload(payload, 1), changes


def test_an_append_rolled_back_leaves_no_combination_ids_behind(db_url):
    """A rolled-back append inserted combinations; the partition must not index later
    results under the ids those rows had (SQLite gives them to the next ones)."""
    from helpers import result_event
    store = MemoryStore(db_url)
    part = store.partition(A)
    part.append_many([result_event(1.0, target="cup")])
    with pytest.raises(ZeroDivisionError), store.write() as conn:
        part.append_in(conn, [result_event(2.0, target="rolled_back_mug")])
        1 / 0
    part.append_many([result_event(3.0, target="plate"), result_event(4.0, target="cup")])
    with store.read() as conn:
        indexed = conn.exec_driver_sql(
            "SELECT e.seq, c.target_class FROM result_facets f JOIN events e "
            "ON e.id = f.event_id JOIN result_combos c ON c.combo_id = f.combo_id "
            "ORDER BY e.seq").all()
    assert indexed == [(1, "cup"), (2, "plate"), (3, "cup")]

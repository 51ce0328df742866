"""Shipping sealed segments to the fleet's PostgreSQL (a real server on loopback): each
robot ships as its own login role under row-level security, a segment is receipted only
once the server re-hashed what it stored, an upload cut off mid-transaction or a row
whose bytes do not hash is never taken for shipped, and with the robot's own segments
deleted the whole chain verifies, replays and explains from the live store plus the
fleet's copies. The outage test stops the server under a consolidator that compacts and
ships, and starts it again."""

import subprocess
import sys
import time
import uuid

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from robot_memory.consolidation import consolidation_pass
from robot_memory.consolidation.service import WARN, ConsolidationService
from robot_memory.event_kinds import SEGMENT_SHIPPED
from robot_memory.operation.parameters import node_settings
from robot_memory.retention.compaction import compact, compactable_until
from robot_memory.retention.destinations import (FleetStoreDestination, ShippingError,
                                                 destination_from_url)
from robot_memory.retention.shipping import (Shipper, pending_segments, receipts,
                                             shipped_segments)
from robot_memory.store import MemoryStore, compactions
from robot_memory.store.fleet_segments import insert_upload
from robot_memory.store.roles import add_robot_role, init_security
from test_compaction import CONFIG, IDENT, stream

OTHER = "d" * 64
PASSWORD = "pw-s3cret-never-shown"
PERMISSION_DENIED = "42501"


class Fleet:
    """A fleet database owned by an ordinary role, `db init` applied, two robot roles."""

    def __init__(self, server):
        suffix = uuid.uuid4().hex[:8]
        self.server, self.db = server, f"rm_fleet_{suffix}"
        self.owner, self.robot_a, self.robot_b = (f"rm_owner_{suffix}", f"robot_a_{suffix}",
                                                  f"robot_b_{suffix}")
        admin = create_engine(f"{server.url}/postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f"CREATE ROLE {self.owner} LOGIN CREATEROLE"))
            conn.execute(text(f'CREATE DATABASE "{self.db}" OWNER {self.owner}'))
        admin.dispose()
        MemoryStore(self.url(self.owner)).close()  # the tables, as the owner
        engine = create_engine(self.url(self.owner))
        with engine.begin() as conn:
            init_security(conn)
            add_robot_role(conn, self.robot_a, IDENT, password=PASSWORD)
            add_robot_role(conn, self.robot_b, OTHER, password=PASSWORD)
        engine.dispose()

    def url(self, role: str, password: str | None = None) -> str:
        secret = f":{password}" if password else ""
        return (self.server.url.replace("postgres@", f"{role}{secret}@") + f"/{self.db}")


def robot_store(where, rounds=2, seed=0):
    """A robot's own SQLite store with `rounds` compactions (segments in where/segments)."""
    store = MemoryStore(f"sqlite:///{where / 'memory.db'}")
    partition = store.partition(IDENT)
    t = 1000.0
    for number in range(rounds):
        partition.append_many(stream(seed + number, 90, t))
        t += 90
        consolidation_pass(partition, CONFIG, stamp_ns=int(t * 1e9))
        assert compact(partition, compactable_until(partition) - 10, where / "segments",
                       stamp_ns=int(t * 1e9)).compaction is not None
    return store, partition


def cli(*args):
    return subprocess.run([sys.executable, "-m", "robot_memory.cli", *args],
                          capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def fleet(pg_server):
    return Fleet(pg_server)


def test_ship_receipt_and_verify_replay_explain_from_the_fleet_copy(fleet, tmp_path):
    store, partition = robot_store(tmp_path)
    db = f"sqlite:///{tmp_path / 'memory.db'}"
    replayed_locally = cli("replay", "--db", db, "--identity", IDENT, "--until-event",
                           "60", "--archive-dir", str(tmp_path / "segments"))
    assert replayed_locally.returncode == 0, replayed_locally.stderr
    # Small chunks: a segment is many rows, re-hashed by the server in order.
    destination = FleetStoreDestination(fleet.url(fleet.robot_a, PASSWORD), chunk_bytes=4096)
    shipper = Shipper(destination, tmp_path / "segments", backoff_cap_s=5, time_limit_s=60)
    done = shipper.run(partition, lambda: 42)
    assert done.error == "" and len(done.shipped) == 2 and done.pending == 0
    with store.read() as conn:
        found = compactions(IDENT, conn)
    assert shipped_segments(partition) == {c.segment: c.segment_sha256 for c in found}
    for c in found:
        receipt = receipts(partition)[c.segment]
        assert receipt.sha256 == c.segment_sha256
        assert receipt.size_bytes == (tmp_path / "segments" / c.segment).stat().st_size
        assert receipt.destination == fleet.url(fleet.robot_a)  # the role, no password
    shown = (repr([e.payload for e in partition.events(kinds=[SEGMENT_SHIPPED])])
             + repr(shipper.diagnostic_values()))
    assert PASSWORD not in shown
    owner = create_engine(fleet.url(fleet.owner))
    with owner.begin() as conn:
        chunks = conn.execute(text("SELECT count(*) FROM fleet_segment_chunks c JOIN "
                                   "fleet_segments s USING (upload_id) WHERE s.identity_hash "
                                   "= :i"), {"i": IDENT}).scalar()
    owner.dispose()
    assert chunks > 2  # more than one chunk per segment
    assert shipper.run(partition, lambda: 43).shipped == []  # receipts say what is done
    destination.close()
    store.close()

    for c in found:  # the robot's disk freed of them: the fleet holds the history
        (tmp_path / "segments" / c.segment).unlink()
    local_only = cli("verify", "--full", "--db", db, "--archives", str(tmp_path / "segments"))
    assert local_only.returncode == 1 and "missing" in local_only.stdout
    fleet_url = fleet.url(fleet.robot_a)
    env_password = {"PGPASSWORD": PASSWORD}  # as ~/.pgpass would give it
    verified = subprocess.run(
        [sys.executable, "-m", "robot_memory.cli", "verify", "--full", "--db", db,
         "--archives", str(tmp_path / "segments"), "--fleet", fleet_url],
        capture_output=True, text=True, timeout=180, env={**_env(), **env_password})
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "0 segment(s) on the robot, 2 fetched from the fleet store" in verified.stdout
    assert "2 archive segment(s) intact" in verified.stdout
    assert "store verified (full check)" in verified.stdout
    replayed = cli("replay", "--db", db, "--identity", IDENT, "--until-event", "60",
                   "--archive-dir", str(tmp_path / "segments"), "--fleet", fleet_url)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == replayed_locally.stdout
    assert cli("replay", "--db", db, "--identity", IDENT, "--until-event", "60",
               "--archive-dir", str(tmp_path / "segments")).returncode != 0
    facts = MemoryStore(db).partition(IDENT).facts()
    explained = cli("explain", "--db", db, "--identity", IDENT, str(facts[0].id), "--json",
                    "--fleet", fleet_url)
    assert explained.returncode == 0, explained.stderr
    assert "2 fetched from the fleet store" in explained.stderr


def _env():
    import os
    return dict(os.environ)


def test_a_robot_role_reads_and_writes_only_its_own_segments(fleet, tmp_path):
    store, partition = robot_store(tmp_path, rounds=1, seed=100)
    a = FleetStoreDestination(fleet.url(fleet.robot_a))
    assert Shipper(a, tmp_path / "segments", backoff_cap_s=5,
                   time_limit_s=60).run(partition, lambda: 1).error == ""
    segment = next(iter(receipts(partition).values()))
    b = FleetStoreDestination(fleet.url(fleet.robot_b))
    # B cannot see A's copy: neither confirmed nor fetched, not even counted.
    assert b.confirm(IDENT, segment.segment, segment.sha256) is None
    assert not b.fetch(IDENT, segment.segment, segment.sha256, tmp_path / "stolen")
    engine = create_engine(fleet.url(fleet.robot_b))
    with engine.begin() as conn:
        for table in ("fleet_segments", "fleet_segment_chunks"):
            assert conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() == 0
    # Nor write one under A's identity: the policy's check refuses the row.
    with pytest.raises(ShippingError, match="row-level security"):
        b.upload(IDENT, "forged.segment.jsonl", "0" * 64,
                 tmp_path / "segments" / segment.segment, 1)
    for statement in ("UPDATE fleet_segments SET sha256 = 'x'", "DELETE FROM fleet_segments",
                      "DELETE FROM fleet_segment_chunks"):
        with pytest.raises(DBAPIError) as refused, engine.begin() as conn:
            conn.execute(text(statement))
        assert refused.value.orig.sqlstate == PERMISSION_DENIED
    engine.dispose()
    # A reads its own back, byte for byte.
    assert a.fetch(IDENT, segment.segment, segment.sha256, tmp_path / "back")
    assert (tmp_path / "back").read_bytes() == \
        (tmp_path / "segments" / segment.segment).read_bytes()
    for destination in (a, b):
        destination.close()
    store.close()


def test_a_partial_upload_or_a_row_that_does_not_hash_is_not_shipped(fleet, tmp_path):
    store, partition = robot_store(tmp_path, rounds=1, seed=200)
    c = pending_segments(partition)[0]
    data = (tmp_path / "segments" / c.segment).read_bytes()
    robot = create_engine(fleet.url(fleet.robot_a))
    owner = create_engine(fleet.url(fleet.owner), isolation_level="AUTOCOMMIT")

    def cut_off(conn):
        """The first chunks, then the connection is lost (the server ends it)."""
        pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
        yield data[:1000]
        yield data[1000:2000]
        with owner.connect() as admin:
            admin.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
        yield data[2000:]

    with pytest.raises(DBAPIError), robot.begin() as conn:
        insert_upload(conn, IDENT, c.segment, c.segment_sha256, cut_off(conn), 1)
    destination = FleetStoreDestination(fleet.url(fleet.robot_a))
    assert destination.confirm(IDENT, c.segment, c.segment_sha256) is None
    # A committed row whose bytes are not the segment's (written behind the robot's
    # back): the server's re-hash does not match, so it is not taken for the segment.
    with owner.connect() as conn:
        bad = uuid.uuid4().hex
        conn.execute(text("INSERT INTO fleet_segments VALUES (:u, :i, :s, :h, :n, 1, 0)"),
                     {"u": bad, "i": IDENT, "s": c.segment, "h": c.segment_sha256,
                      "n": len(data)})
        conn.execute(text("INSERT INTO fleet_segment_chunks VALUES (:u, :i, 0, :d)"),
                     {"u": bad, "i": IDENT, "d": data[:-1] + b"X"})
    assert destination.confirm(IDENT, c.segment, c.segment_sha256) is None
    assert not destination.fetch(IDENT, c.segment, c.segment_sha256, tmp_path / "bad")
    assert receipts(partition) == {} and shipped_segments(partition) == {}
    # An upload whose bytes do not hash to what it claims is rolled back whole.
    other = tmp_path / "other.bin"
    other.write_bytes(data + b"\n")
    with pytest.raises(ShippingError, match="rolled back"):
        destination.upload(IDENT, c.segment, c.segment_sha256, other, 2)
    # The real upload then ships, and only its copy counts.
    done = Shipper(destination, tmp_path / "segments", backoff_cap_s=5,
                   time_limit_s=60).run(partition, lambda: 3)
    assert done.error == "" and [r.segment for r in done.shipped] == [c.segment]
    assert destination.fetch(IDENT, c.segment, c.segment_sha256, tmp_path / "good")
    assert (tmp_path / "good").read_bytes() == data
    for engine in (robot, owner):
        engine.dispose()
    destination.close()
    store.close()


def test_an_outage_delays_shipping_and_everything_ships_when_the_server_is_back(
        own_pg_server, tmp_path):
    fleet = Fleet(own_pg_server)
    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.db'}")
    partition = store.partition(IDENT)
    params = node_settings("consolidator", {
        "archive_dir": str(tmp_path / "segments"), "retain_events": 20,
        "compact_every_events": 30, "fleet_store_url": fleet.url(fleet.robot_a, PASSWORD),
        "fleet_backoff_cap_s": 2.0})
    service = ConsolidationService.from_parameters(params)
    t = 1000.0

    def batch():
        nonlocal t
        partition.append_many(stream(int(t), 60, t))
        t += 60
        service.run_pass()  # folds the batch, compacts the one before, ships
        service.run_pass()

    service.attach(partition)
    batch()
    assert service.counts.compactions >= 1 and service.shipper.pending == 0
    shipped_before = len(receipts(partition))
    assert shipped_before >= 1

    own_pg_server.stop()
    try:
        waits = []
        for _ in range(3):
            batch()
            waits.append(service.diagnostic_values()["shipping_next_retry_s"])
            time.sleep(1.1)  # past the first backoff: each round tries and fails
        assert service.shipper.failures >= 2 and service.shipper.last_error
        assert PASSWORD not in service.shipper.last_error
        assert len(receipts(partition)) == shipped_before  # no receipt without the server
        assert len(shipped_segments(partition)) == shipped_before  # nothing more prunable
        values = service.diagnostic_values()
        assert values["segments_pending"] >= 2 and values["shipping_failed_rounds"] >= 2
        assert 0 < max(waits) <= 2.0  # a retry is scheduled, within the cap
        level, message = service.status()
        assert level == WARN and "shipping to the fleet store failing" in message
        assert PASSWORD not in repr(values) + message
    finally:
        own_pg_server.start()
    time.sleep(2.1)  # the backoff passes
    service.run_pass()
    with store.read() as conn:
        found = compactions(IDENT, conn)
    assert service.shipper.last_error == "" and service.shipper.pending == 0
    assert shipped_segments(partition) == {c.segment: c.segment_sha256 for c in found}
    assert service.status()[0] != WARN or "shipping" not in service.status()[1]
    confirm = destination_from_url(fleet.url(fleet.robot_a))
    assert all(confirm.confirm(IDENT, c.segment, c.segment_sha256) for c in found)
    confirm.close()
    service.close()
    store.close()

"""import-bag on real rosbag2 bags written by the `rosbags` writer, MCAP and SQLite3."""

import json
import subprocess
import sys
import textwrap

import pytest
from bag_files import result_msg, write_bag

from robot_memory.errors import InputError
from robot_memory.bags.mapping import MappingError, load_mapping
from robot_memory.bags.reading import make_typestore
from robot_memory.bags.importing import import_bag
from robot_memory.event_kinds import EXECUTION_RESULT, IMPORT, PRIVACY_REJECTION
from robot_memory.manifest import load_manifest
from robot_memory.store import MemoryStore

S = 10**9
T0 = 1_700_000_000 * S


def run(*args):
    return subprocess.run([sys.executable, "-m", "robot_memory.cli", *args],
                          capture_output=True, text=True, timeout=120)


def mixed_bag(path, storage, n_good=40):
    """n_good valid results (some with a zero header stamp), 4 invalid ones, and a topic of
    another type that is not imported."""
    store = make_typestore()
    results = [(T0 + i * S + 7, result_msg(store, T0 + i * S if i % 10 else 0,
                                           success=i % 4 != 0, force=20.0 + i % 5),
                "robot_memory/msg/ExecutionResult") for i in range(n_good)]
    bad = [result_msg(store, T0, skill=""),
           result_msg(store, T0, parameters=[("force_n", float("nan"))]),
           result_msg(store, T0, parameters=[("force_n", 1.0), ("force_n", 2.0)]),
           result_msg(store, T0, notes="call me at alice@example.com")]
    results += [(T0 + (n_good + j) * S, msg, "robot_memory/msg/ExecutionResult")
                for j, msg in enumerate(bad)]
    chatter = [(T0 + i * S, store.types["std_msgs/msg/String"](data=f"hi {i}"),
                "std_msgs/msg/String") for i in range(5)]
    return write_bag(path, storage, {"/skills/results": results, "/chatter": chatter}, store)


@pytest.fixture
def partition(db_url, manifest_file):
    store = MemoryStore(db_url)
    yield store.partition(load_manifest(manifest_file).identity_hash())
    store.close()


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_bag_imports_with_exact_counts_and_twice_is_a_no_op(tmp_path, partition, storage):
    bag = mixed_bag(tmp_path / "bag", storage)
    seen = []
    report = import_bag(partition, bag, on_rejection=seen.append, progress=False)
    assert (report.read, report.imported, len(report.rejections)) == (44, 40, 4)
    assert report.topics == ["/skills/results"]
    assert report.rejected_by_reason == {"duplicate_key": 1, "empty_skill_id": 1,
                                         "non_finite_value": 1, "privacy_email": 1}
    assert [r.topic for r in seen] == ["/skills/results"] * 4
    assert all(r.log_time_ns >= T0 + 40 * S for r in seen)
    assert partition.count_events(EXECUTION_RESULT) == 40
    assert partition.count_events(PRIVACY_REJECTION) == 1
    stored = list(partition.events([EXECUTION_RESULT]))
    # Header stamp when set, the bag's receive time when the header stamp is zero.
    assert stored[0].stamp_ns == T0 + 7 and stored[1].stamp_ns == T0 + S
    assert stored[3].payload["parameters"] == {"force_n": 23.0}
    assert stored[4].payload["success"] is False
    event = partition.latest_event(IMPORT)
    assert event.payload["bag"]["sha256"] == report.bag["sha256"]
    assert event.payload["counts"] == {"read": 44, "imported": 40, "rejected": 4,
                                       "already_imported": 0, "unread": 0}
    head = partition.head()

    again = import_bag(partition, bag, progress=False)
    assert (again.imported, again.already_imported, again.event_seq) == (0, 44, None)
    assert "already imported" in again.summary()
    assert partition.head() == head  # nothing at all was added


def test_windows_and_topics_then_the_rest_imports_each_message_once(tmp_path, partition):
    store = make_typestore()
    messages = [(T0 + i * S, result_msg(store, T0 + i * S), "robot_memory/msg/ExecutionResult")
                for i in range(30)]
    bag = write_bag(tmp_path / "bag", "mcap", {"/a": messages, "/b": messages[:10]}, store)
    first = import_bag(partition, bag, topics=["/a"], since_ns=T0 + 10 * S,
                       until_ns=T0 + 20 * S, progress=False)
    assert (first.read, first.imported) == (10, 10)
    rest = import_bag(partition, bag, progress=False)
    assert (rest.read, rest.imported, rest.already_imported) == (40, 30, 10)
    assert partition.count_events(EXECUTION_RESULT) == 40
    assert import_bag(partition, bag, progress=False).imported == 0


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_damaged_bag_imports_what_can_be_read_and_says_what_not(tmp_path, db_url,
                                                                manifest_file, storage):
    store = make_typestore()
    messages = [(T0 + i * S, result_msg(store, T0 + i * S, force=float(i)),
                 "robot_memory/msg/ExecutionResult") for i in range(400)]
    bag = write_bag(tmp_path / "bag", storage, {"/results": messages}, store)
    data = next(bag.glob("*.mcap" if storage == "mcap" else "*.db3"))
    size = data.stat().st_size
    with open(data, "r+b") as handle:  # a recorder killed mid-write: the tail is gone
        handle.truncate(size * 6 // 10 // 4096 * 4096)

    cli = run("import-bag", str(bag), "--db", db_url, "--manifest", str(manifest_file))
    assert cli.returncode == 1, cli.stderr
    assert "DAMAGED BAG" in cli.stdout and "could not read" in cli.stderr
    imported = int(cli.stdout.split("imported ")[1].split()[0])
    unread = int(cli.stderr.split("could not read: ")[-1].split()[0])
    assert 100 < imported < 400 and imported + unread == 400
    stored = MemoryStore(db_url).partition(load_manifest(manifest_file).identity_hash())
    forces = [e.payload["parameters"]["force_n"] for e in stored.events([EXECUTION_RESULT])]
    assert forces == [float(i) for i in range(imported)]  # the readable prefix, in order
    assert stored.latest_event(IMPORT).payload["damage"]


def test_corrupt_page_in_the_middle_of_a_sqlite3_bag_is_skipped_over(tmp_path, partition):
    store = make_typestore()
    messages = [(T0 + i * S, result_msg(store, T0 + i * S, force=float(i)),
                 "robot_memory/msg/ExecutionResult") for i in range(400)]
    bag = write_bag(tmp_path / "bag", "sqlite3", {"/results": messages}, store)
    data = bag / "bag.db3"
    pages = data.stat().st_size // 4096
    with open(data, "r+b") as handle:
        handle.seek(4096 * (pages // 2))
        handle.write(b"\xa5" * 4096)
    report = import_bag(partition, bag, progress=False)
    assert 300 < report.imported < 400
    assert report.unread == {"/results": 400 - report.imported}
    assert any("unreadable" in note for note in report.damage)
    forces = [e.payload["parameters"]["force_n"] for e in partition.events([EXECUTION_RESULT])]
    assert forces[0] == 0.0 and forces[-1] == 399.0  # both sides of the bad page


GRASP_OUTCOME = """\
std_msgs/Header header
string object_class
string station
uint8 result_code
string error_text
float64 grip_force_n
float64 measured_mass_kg
"""


def test_mapping_file_brings_in_a_skills_own_message(tmp_path, partition):
    msg_file = tmp_path / "acme_msgs" / "msg" / "GraspOutcome.msg"
    msg_file.parent.mkdir(parents=True)
    msg_file.write_text(GRASP_OUTCOME)
    mapping_file = tmp_path / "mapping.yaml"
    mapping_file.write_text(textwrap.dedent("""\
        types:
          acme_msgs/msg/GraspOutcome:
            msg_files: [acme_msgs/msg/GraspOutcome.msg]
            fields:
              skill_id: {value: manipulation.grasp}
              target_class: object_class
              environment: {value: lab}
              zone: station
              success: {field: result_code, equals: 0}
              failure_reason: error_text
              parameters: {force_n: grip_force_n}
              observations: {mass_kg: measured_mass_kg}
        """))
    mapping = load_mapping(mapping_file)
    store = make_typestore(mapping.msg_files)
    types = store.types

    def outcome(i):
        return types["acme_msgs/msg/GraspOutcome"](
            header=types["std_msgs/msg/Header"](
                stamp=types["builtin_interfaces/msg/Time"](sec=1000 + i, nanosec=0),
                frame_id=""),
            object_class="mug", station="bench_2", result_code=i % 2,
            error_text="" if i % 2 == 0 else "slipped", grip_force_n=10.0 + i,
            measured_mass_kg=float("inf") if i == 5 else 0.3)
    bag = write_bag(tmp_path / "bag", "mcap", {"/acme/grasp": [
        (T0 + i * S, outcome(i), "acme_msgs/msg/GraspOutcome") for i in range(8)]}, store)

    report = import_bag(partition, bag, mapping=mapping, progress=False)
    assert (report.imported, report.rejected_by_reason) == (7, {"non_finite_value": 1})
    first, second = list(partition.events([EXECUTION_RESULT]))[:2]
    assert first.stamp_ns == 1000 * S
    assert first.payload | {} == {**first.payload, "skill_id": "manipulation.grasp",
                                  "target_class": "mug", "environment": "lab",
                                  "zone": "bench_2", "success": True,
                                  "parameters": {"force_n": 10.0},
                                  "observations": {"mass_kg": 0.3}}
    assert (second.payload["success"], second.payload["failure_reason"]) == (False, "slipped")
    # Without the mapping the topic is not importable: nothing is read, nothing added.
    head = partition.head()
    again = import_bag(partition, bag, progress=False)
    assert (again.topics, again.event_seq, partition.head()) == ([], None, head)


def test_mapping_errors_name_file_and_key(tmp_path):
    bad = tmp_path / "m.yaml"
    bad.write_text("types:\n  a/msg/B:\n    fields: {skill_id: x, sucess: ok}\n")
    with pytest.raises(MappingError, match=r"m.yaml: types.a/msg/B.fields: unknown .*sucess"):
        load_mapping(bad)


def test_cli_reports_each_rejection_with_topic_and_time(tmp_path, db_url, manifest_file):
    bag = mixed_bag(tmp_path / "bag", "sqlite3", n_good=5)
    first = run("import-bag", str(bag), "--db", db_url, "--manifest", str(manifest_file))
    assert first.returncode == 1  # some messages were rejected
    assert "imported 5 execution results" in first.stdout and "rejected 4" in first.stdout
    lines = [line for line in first.stderr.splitlines() if "rejected:" in line]
    assert len(lines) == 4 and all("/skills/results @ 1700000" in line for line in lines)
    assert any("notes: looks like email" in line for line in lines)
    second = run("import-bag", str(bag), "--db", db_url, "--manifest", str(manifest_file))
    assert second.returncode == 0 and "already imported" in second.stdout
    missing = run("import-bag", str(bag), "--topic", "/nope", "--db", db_url, "--manifest",
                  str(manifest_file))
    assert missing.returncode == InputError.exit_code and "/nope" in missing.stderr
    facts = run("facts", "--json", "--db", db_url, "--manifest", str(manifest_file))
    assert json.loads(facts.stdout) == []  # consolidation is the consolidator's job


def test_import_into_postgres_is_idempotent_too(tmp_path, pg_url, manifest_file):
    bag = mixed_bag(tmp_path / "bag", "mcap", n_good=12)
    store = MemoryStore(pg_url)
    partition = store.partition(load_manifest(manifest_file).identity_hash())
    assert import_bag(partition, bag, progress=False).imported == 12
    assert import_bag(partition, bag, progress=False).imported == 0
    assert partition.count_events(EXECUTION_RESULT) == 12
    store.close()


def _results_bag(tmp_path, storage, notes=lambda i: ""):
    store = make_typestore()
    messages = [(T0 + i * S, result_msg(store, T0 + i * S, force=float(i), notes=notes(i)),
                 "robot_memory/msg/ExecutionResult") for i in range(50)]
    bag = write_bag(tmp_path / "bag", storage, {"/results": messages}, store)
    return bag, next(bag.glob("*.mcap" if storage == "mcap" else "*.db3")), store, messages


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_hostile_lengths_in_a_bag_cost_only_their_message(tmp_path, partition, storage):
    """A message whose string claims 4 GB is refused as malformed (the reason the logger
    gives such bytes); one far over the largest valid result is refused unread; the rest
    imports, at a bounded cost."""
    bag, data, store, messages = _results_bag(
        tmp_path, storage, notes=lambda i: "n" * 200_000 if i == 7 else "")
    first = store.serialize_cdr(messages[0][1], "robot_memory/msg/ExecutionResult")
    raw = bytearray(data.read_bytes())
    at = raw.find(first)
    raw[at + 20:at + 24] = (0xFFFFFFF0).to_bytes(4, "little")  # skill_id's length
    data.write_bytes(bytes(raw))
    report = import_bag(partition, bag, progress=False)
    assert report.imported == 48
    assert report.rejected_by_reason == {"oversized": 1, "malformed": 1}
    forces = [e.payload["parameters"]["force_n"] for e in partition.events([EXECUTION_RESULT])]
    assert forces == [float(i) for i in range(1, 50) if i != 7]


def test_an_mcap_record_claiming_a_terabyte_is_damage_not_a_crash(tmp_path, partition):
    bag, data, _, _ = _results_bag(tmp_path, "mcap")
    raw = bytearray(data.read_bytes())
    at = raw.find(b"\x05", 100)  # the first Message record's opcode
    raw[at + 1:at + 9] = (1 << 40).to_bytes(8, "little")
    data.write_bytes(bytes(raw))
    report = import_bag(partition, bag, progress=False)
    assert report.damage or report.unread
    assert "DAMAGED BAG" in report.summary()

"""Results serialized by the message before `attempt_id` and `amends` existed (a skill
built against it, a bag recorded with it) still read: their bytes end after `notes`, and
both read as empty. Serialized here by rosbags from that older definition (every field of
msg/ExecutionResult.msg but the last two), read by the logger's reader and imported from
real bags in both storage formats."""

import pytest
from bag_files import write_bag
from rosbags.typesys import get_types_from_msg

from robot_memory.bags.importing import import_bag
from robot_memory.bags.reading import EXECUTION_RESULT_TYPE, make_typestore
from robot_memory.event_kinds import EXECUTION_RESULT
from robot_memory.store import MemoryStore
from robot_memory.wire.execution_result import LAYOUT, OLD_LAYOUT, result_fields_from_cdr
from robot_memory.wire.msg_files import our_msg_dir

S = 10**9
T0 = 1_700_000_000 * S


def older_definition() -> str:
    """msg/ExecutionResult.msg as it was: everything up to and including `notes`."""
    text = (our_msg_dir() / "ExecutionResult.msg").read_text()
    return text[:text.index("string notes") + len("string notes")] + "\n"


def older_store():
    """A typestore whose ExecutionResult is the older message."""
    store = make_typestore()
    older = get_types_from_msg(older_definition(), EXECUTION_RESULT_TYPE)
    store.fielddefs.pop(EXECUTION_RESULT_TYPE)
    store.register(older)
    return store


def older_result(store, stamp_ns: int, success: bool = True, notes: str = ""):
    types = store.types
    header = types["std_msgs/msg/Header"](
        stamp=types["builtin_interfaces/msg/Time"](sec=stamp_ns // S, nanosec=stamp_ns % S),
        frame_id="")
    return types[EXECUTION_RESULT_TYPE](
        header=header, skill_id="manipulation.grasp", target_class="glass_cup",
        environment="sim_relaxed", zone="shelf_a",
        parameters=[types["robot_memory/msg/KeyValue"](key="force_n", value=25.0)],
        observations=[], success=success, failure_reason="" if success else "slipped",
        duration_s=1.5, intent_id="pick-1", notes=notes)


def test_the_older_layout_is_the_current_one_without_the_attempt_fields():
    assert OLD_LAYOUT.fields + (("attempt_id", "string"), ("amends", "string")) == \
        LAYOUT.fields
    assert "attempt_id" not in older_definition() and "amends" not in older_definition()


@pytest.mark.parametrize("notes", ["", "a", "ab", "abc", "worked fine"])
def test_an_older_result_reads_with_both_attempt_fields_empty(notes):
    store = older_store()
    data = bytes(store.serialize_cdr(older_result(store, T0 + 5, notes=notes),
                                     EXECUTION_RESULT_TYPE))
    fields = result_fields_from_cdr(data)
    assert fields is not None
    assert (fields["attempt_id"], fields["amends"], fields["notes"]) == ("", "", notes)
    assert (fields["skill_id"], fields["intent_id"], fields["stamp_ns"]) == \
        ("manipulation.grasp", "pick-1", T0 + 5)
    # Cut inside notes, the bytes are no result of either layout.
    assert result_fields_from_cdr(data[:-4 - len(notes)]) is None


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_a_bag_recorded_with_the_older_message_imports(tmp_path, db_url, storage):
    store = older_store()
    results = [(T0 + i * S, older_result(store, T0 + i * S, success=i % 3 != 0),
                EXECUTION_RESULT_TYPE) for i in range(12)]
    bag = write_bag(tmp_path / "older", storage, {"/skill_results": results}, store=store)
    partition = MemoryStore(db_url).partition("a" * 64)
    report = import_bag(partition, bag, progress=False)
    assert (report.imported, report.rejections) == (12, [])
    stored = list(partition.events([EXECUTION_RESULT]))
    assert len(stored) == 12
    assert all("attempt_id" not in e.payload and "amends" not in e.payload for e in stored)
    assert sum(e.payload["success"] for e in stored) == 8

"""Recognising results that publishers deliver again (robot_memory/intake/redelivery.py),
without ROS: the samples are what rclpy's message info names, the log a real store."""

import pytest

from robot_memory.event_kinds import EXECUTION_RESULT
from robot_memory.intake.redelivery import Redelivery, SampleId, sample_of, stored_samples
from robot_memory.store import MemoryStore, NewEvent

GID_A, GID_B = "0a" * 16, "0b" * 16


def result_event(n: int, sample: SampleId | None) -> NewEvent:
    payload = {"skill_id": "manipulation.grasp", "success": True, "intent_id": f"r-{n}"}
    if sample is not None:
        sample.record_in(payload)
    return NewEvent(EXECUTION_RESULT, payload, 1000 + n)


@pytest.fixture
def partition(tmp_path):
    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.db'}")
    yield store.partition("ab" * 32)
    store.close()


def test_the_message_info_of_kilted_and_of_jazzy_name_the_sample():
    kilted = {"source_timestamp": 17, "received_timestamp": 18,
              "publication_sequence_number": 5, "reception_sequence_number": None,
              "publisher_gid": {"implementation_identifier": "rmw_fastrtps_cpp",
                                "data": bytes(range(16))}}
    assert sample_of(kilted) == SampleId(bytes(range(16)).hex(), 5, 17)
    jazzy = {key: kilted[key] for key in kilted if key != "publisher_gid"}
    assert sample_of(jazzy) == SampleId("", 5, 17)
    assert sample_of({**jazzy, "publication_sequence_number": None}) is None  # unsupported


def test_a_writers_history_sent_again_is_new_only_past_what_the_log_holds():
    redelivery = Redelivery(window=100)
    redelivery.remember([SampleId(GID_A, seq, 100 + seq) for seq in range(1, 8)], False)
    again = [SampleId(GID_A, seq, 100 + seq) for seq in range(1, 11)]
    assert [s.seq for s in again if redelivery.is_new(s)] == [8, 9, 10]
    assert not any(redelivery.is_new(s) for s in again)  # now taken: never twice
    assert redelivery.is_new(SampleId(GID_B, 1, 50))  # another writer has its own count


def test_without_gids_a_sample_is_known_by_its_source_stamp_and_sequence_number():
    redelivery = Redelivery(window=100)
    # Two writers at the same sequence numbers, told apart by when they sent.
    redelivery.remember([SampleId("", seq, 1000 * seq) for seq in range(1, 4)], False)
    assert not redelivery.is_new(SampleId("", 2, 2000))
    assert redelivery.is_new(SampleId("", 2, 2001))  # the other writer's second
    assert not redelivery.is_new(SampleId("", 2, 2001))
    assert redelivery.is_new(SampleId("", 4, 4000))


def test_the_gid_less_keys_are_bounded_by_the_window():
    redelivery = Redelivery(window=3)
    for seq in range(1, 11):
        assert redelivery.is_new(SampleId("", seq, seq))
    assert len(redelivery._recent) == 3  # the newest three, not ten


def test_beyond_a_cut_window_a_sample_sent_before_the_oldest_read_is_taken_as_stored():
    redelivery = Redelivery(window=2)
    redelivery.remember([SampleId(GID_A, 9, 900), SampleId("", 4, 950)], log_is_longer=True)
    assert not redelivery.is_new(SampleId(GID_B, 3, 899))  # idle writer, stored long ago
    assert redelivery.is_new(SampleId(GID_B, 4, 901))
    assert not redelivery.is_new(SampleId("", 1, 100))
    assert redelivery.is_new(SampleId("", 1, 1000))
    # A log read whole has no floor: whatever it does not hold is new.
    whole = Redelivery(window=2)
    whole.remember([SampleId(GID_A, 9, 900)], log_is_longer=False)
    assert whole.is_new(SampleId(GID_B, 3, 1))


def test_the_samples_are_read_back_from_the_newest_events_of_the_log(partition):
    partition.append_many([result_event(0, None)]  # logged before samples were recorded
                          + [result_event(n, SampleId(GID_A, n, 10 * n)) for n in range(1, 6)]
                          + [result_event(6, SampleId("", 1, 60))])
    samples, longer = stored_samples(partition, window=100)
    assert samples == [SampleId(GID_A, n, 10 * n) for n in range(1, 6)] + [SampleId("", 1, 60)]
    assert not longer
    samples, longer = stored_samples(partition, window=2)
    assert samples == [SampleId(GID_A, 5, 50), SampleId("", 1, 60)] and longer
    assert stored_samples(partition, window=0) == ([], True)

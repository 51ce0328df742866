"""What each lifecycle transition acquires and releases (docs/nodes.md, "Lifecycle"):
configure opens the store and builds the node's state, cleanup lets go of them, and
activate/deactivate only switch publishing and serving on and off."""

import os
import time
from pathlib import Path

from lifecycle_msgs.msg import State, Transition
from lifecycle_msgs.srv import ChangeState

from robot_memory.event_kinds import EXECUTION_RESULT, FACT_CONSULTATION
from robot_memory.srv import Consolidate, RecordEvent
from robot_memory.store import MemoryStore

from ros.conftest import wait_until
from ros.test_governance import lifecycle_state, record, result, wait_active

QUIET_S = 2.0  # four of the consolidator's pass periods (period_s 0.5 in these tests)


def transition(probe, node: str, transition_id: int) -> None:
    """An operator's `ros2 lifecycle set /<node> <transition>`."""
    answer = probe.call(ChangeState, f"{node}/change_state",
                        ChangeState.Request(transition=Transition(id=transition_id)))
    assert answer.success, f"{node}: transition {transition_id} refused"


def holds_store(pid: int, db_url: str) -> bool:
    """The process has the SQLite database (or its write-ahead log) open."""
    database = Path(db_url.removeprefix("sqlite:///")).resolve()
    names = {str(database), f"{database}-wal", f"{database}-shm"}
    fds = Path(f"/proc/{pid}/fd")
    return any(os.path.realpath(fds / fd) in names for fd in os.listdir(fds))


def stored(db_url: str, identity: str, kind: str) -> int:
    store = MemoryStore(db_url)
    try:
        return len(list(store.partition(identity).events([kind])))
    finally:
        store.close()


def consultations(db_url: str, identity: str) -> int:
    return stored(db_url, identity, FACT_CONSULTATION)


def test_the_consolidator_holds_its_store_from_configure_to_cleanup_and_publishes_only_active(
        probe, start_stack, db_url):
    stack = start_stack()
    wait_active(probe, "consolidator")
    wait_until(lambda: probe.facts, 30, "the snapshot published on activation")
    pid = stack.process_of("consolidator").pid
    wait_until(lambda: holds_store(pid, db_url), 10, "the active consolidator's open store")

    transition(probe, "consolidator", Transition.TRANSITION_DEACTIVATE)
    assert holds_store(pid, db_url), "deactivate only stops passes and publishing"
    transition(probe, "consolidator", Transition.TRANSITION_CLEANUP)
    wait_until(lambda: not holds_store(pid, db_url), 10, "cleanup to close the store")

    published = len(probe.facts)
    transition(probe, "consolidator", Transition.TRANSITION_CONFIGURE)
    assert lifecycle_state(probe, "consolidator") == State.PRIMARY_STATE_INACTIVE
    assert holds_store(pid, db_url), "configure opens the store"
    refused = probe.call_signed(Consolidate, "consolidate", Consolidate.Request())
    assert not refused.success and refused.reason.startswith("inactive: "), refused.reason
    time.sleep(QUIET_S)
    assert len(probe.facts) == published, "configured but inactive, `facts` stays silent"

    transition(probe, "consolidator", Transition.TRANSITION_ACTIVATE)
    wait_until(lambda: len(probe.facts) > published, 10, "the snapshot on activation")
    assert probe.call_signed(Consolidate, "consolidate", Consolidate.Request()).success


def test_the_grounding_server_serves_only_while_active_and_builds_anew_after_cleanup(
        probe, start_stack, db_url, certified_hash):
    start_stack()
    wait_active(probe, "grounding_server")
    served = probe.grounding.query("manipulation.grasp", "glass_cup")
    assert served.status != "IDENTITY_UNVERIFIED" and served.consultation_id

    transition(probe, "grounding_server", Transition.TRANSITION_DEACTIVATE)
    transition(probe, "grounding_server", Transition.TRANSITION_CLEANUP)
    # What was answered before cleanup is in the log: cleanup flushed the audit writer.
    assert consultations(db_url, certified_hash) == 1
    transition(probe, "grounding_server", Transition.TRANSITION_CONFIGURE)
    inactive = probe.grounding.query("manipulation.grasp", "glass_cup")
    assert inactive.status == "IDENTITY_UNVERIFIED" and inactive.consultation_id == ""

    transition(probe, "grounding_server", Transition.TRANSITION_ACTIVATE)
    again = probe.grounding.query("manipulation.grasp", "glass_cup")
    assert again.status == served.status and again.consultation_id
    wait_until(lambda: consultations(db_url, certified_hash) == 2, 10,
               "the new audit writer to record the answer (the inactive one is not)")


def test_the_logger_holds_its_store_from_configure_to_cleanup_and_takes_results_only_active(
        probe, start_stack, db_url, certified_hash):
    stack = start_stack()
    wait_active(probe, "episodic_logger")
    probe.wait_logger()
    pid = stack.process_of("episodic_logger").pid
    assert record(probe, result()).accepted
    for n in range(20):
        probe.publish_result(stamp_s=100.0 + n)
    wait_until(lambda: stored(db_url, certified_hash, EXECUTION_RESULT) == 21, 30,
               "the published results in the log")

    transition(probe, "episodic_logger", Transition.TRANSITION_DEACTIVATE)
    assert holds_store(pid, db_url), "deactivate only stops taking results"
    refused = record(probe, result())
    assert refused.reason_code == RecordEvent.Response.REASON_INACTIVE, refused.reason
    probe.publish_result(stamp_s=200.0)  # no reader now: the logger never sees it
    transition(probe, "episodic_logger", Transition.TRANSITION_CLEANUP)
    wait_until(lambda: not holds_store(pid, db_url), 10, "cleanup to close the store")
    assert stored(db_url, certified_hash, EXECUTION_RESULT) == 21

    transition(probe, "episodic_logger", Transition.TRANSITION_CONFIGURE)  # opens the store
    refused = record(probe, result())
    assert refused.reason_code == RecordEvent.Response.REASON_INACTIVE, refused.reason
    transition(probe, "episodic_logger", Transition.TRANSITION_ACTIVATE)
    assert record(probe, result(stamp_s=300.0)).accepted
    assert stored(db_url, certified_hash, EXECUTION_RESULT) == 22

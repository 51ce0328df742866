"""Ctrl-C keeps what reached the logger: results published (and acknowledged by DDS) but
not yet taken from the readers when the stop comes are taken and stored before the
process exits. A burst, then Ctrl-C at once; a steady stream at 200 and 1,000/s, then
Ctrl-C at once; in both process modes. Before, a burst of 2,000 kept 356 to 1,000."""

import os
import re
import signal
import time

import pytest

from robot_memory.event_kinds import EXECUTION_RESULT
from robot_memory.store import MemoryStore, verify_chain

from ros.conftest import BOTH_PROCESS_MODES, stack_log, wait_until

pytestmark = pytest.mark.ros


def publish(probe, count: int, rate_hz: float | None) -> None:
    """`count` results, paced at rate_hz (None: as fast as they go)."""
    started = time.monotonic()
    for i in range(count):
        if rate_hz is not None:
            delay = started + i / rate_hz - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        probe.publish_result(stamp_s=100 + i * 0.001, intent_id=f"r-{i}")
    probe.results.wait_for_all_acked()  # every reader has them: DDS confirmed


@BOTH_PROCESS_MODES
@pytest.mark.parametrize("count,rate_hz", [(2000, None), (400, 200.0), (2000, 1000.0)],
                         ids=["burst_2000", "steady_200_per_s", "steady_1000_per_s"])
def test_ctrl_c_stores_every_result_that_reached_the_logger(
        probe, start_stack, certified_hash, db_url, count, rate_hz):
    stack = start_stack(own_process_group=True, period_s=3600.0)
    probe.wait_identity()
    probe.wait_logger()
    publish(probe, count, rate_hz)
    os.killpg(stack.pgid, signal.SIGINT)  # at once, as a terminal's Ctrl-C
    for process in stack.processes.values():
        process.wait(30)
    assert all(p.returncode == 0 for p in stack.processes.values()), stack_log(stack)[-3000:]
    partition = MemoryStore(db_url).partition(certified_hash)
    intents = [e.payload["intent_id"] for e in partition.events([EXECUTION_RESULT])]
    assert len(intents) == len(set(intents)), "a result stored twice"
    missing = {f"r-{i}" for i in range(count)} - set(intents)
    assert not missing, f"{len(missing)} of {count} results lost at Ctrl-C; " \
        f"log: {stack_log(stack)[-2000:]}"
    assert verify_chain(partition).ok


def test_what_is_still_unread_when_the_drain_runs_out_is_counted_and_logged(
        probe, start_stack, certified_hash, db_url):
    """drain_on_stop_s 0: nothing is taken at stop, and every result is stored or
    counted unread (the round in progress may take some first)."""
    stack = start_stack(own_process_group=True, period_s=3600.0, drain_on_stop_s=0.0,
                        intake_period_s=1.0)
    probe.wait_identity()
    probe.wait_logger()
    wait_until(lambda: probe.diagnostics.get("episodic_logger"), 30, "the logger's status")
    time.sleep(1.0)  # just past an intake round: the next one is a second away
    publish(probe, 500, None)
    os.killpg(stack.pgid, signal.SIGINT)
    for process in stack.processes.values():
        process.wait(30)
    stored = len(list(MemoryStore(db_url).partition(certified_hash)
                      .events([EXECUTION_RESULT])))
    log = stack_log(stack)
    said = re.search(r"(\d+) results still unread in the readers when the logger stopped "
                     r"were not stored \(drain_on_stop_s 0 s ran out; reason unread_at_stop\)",
                     log)
    unread = int(said.group(1)) if said else 0
    assert stored + unread == 500, f"{stored} stored, {unread} counted unread: " \
        f"{500 - stored - unread} lost silently"

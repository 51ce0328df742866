"""The served tier gated at boot, over real node processes: a fact edited in the store
file (the chain itself intact) halts the memory nodes before anything is served, with
the same STORE_CORRUPTED diagnosis a broken chain gets."""

import sqlite3

from lifecycle_msgs.msg import State

from robot_memory.consolidation import consolidation_pass
from robot_memory.msg import IdentityStatus
from robot_memory.store import MemoryStore
from helpers import result_event

from ros.conftest import stack_log, wait_until
from ros.test_governance import lifecycle_state

ERROR = 2  # diagnostic_msgs/DiagnosticStatus ERROR


def test_an_edited_fact_halts_the_memory_nodes_at_boot(probe, start_stack, certified_hash,
                                                       db_url):
    store = MemoryStore(db_url)
    part = store.partition(certified_hash)
    part.append_many([result_event(i) for i in range(12)])
    consolidation_pass(part)
    fact = next(f for f in part.facts() if f.kind == "skill_success_rate")
    head = part.head()
    store.close()
    # File access, no robot_memory code: the fact a planner would be served, inflated.
    conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
    conn.execute("UPDATE semantic_facts SET confidence = 0.99, fact_value_json = "
                 "replace(fact_value_json, '25.0', '80.0') WHERE id = ?", (fact.id,))
    conn.commit()
    conn.close()
    stack = start_stack()
    status = probe.wait_identity()
    assert status.state == IdentityStatus.STORE_CORRUPTED
    assert "table semantic_facts" in status.reason and "chain intact" in status.reason
    wait_until(lambda: "identity STORE_CORRUPTED" in stack_log(stack), 20, "the log line")
    line = next(line for line in stack_log(stack).splitlines()
                if "identity STORE_CORRUPTED" in line)
    assert "semantic tier differs" in line and "table semantic_facts" in line
    level, message = wait_until(lambda: probe.statuses.get("manifest_verifier"), 20,
                                "the verifier's diagnostics")
    assert level == ERROR and "table semantic_facts" in message
    for node in ("episodic_logger", "consolidator", "grounding_server"):
        assert lifecycle_state(probe, node) == State.PRIMARY_STATE_UNCONFIGURED
    assert probe.grounding.wait_for_service(30)
    # The server may answer before the latched status reached it (it then says it is
    # waiting); once it has, it names the diagnosis. Either way, no fact is served.

    def answer_naming_the_diagnosis():
        answer = probe.grounding.query("manipulation.grasp", "glass_cup")
        assert answer.status == "IDENTITY_UNVERIFIED"
        return answer if "STORE_CORRUPTED" in answer.reason else None

    wait_until(answer_naming_the_diagnosis, 30, "an answer naming STORE_CORRUPTED")
    assert MemoryStore(db_url).partition(certified_hash).head() == head  # nothing written

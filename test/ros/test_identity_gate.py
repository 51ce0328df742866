"""A wrong or invalid manifest: the verifier says why, the memory nodes write and serve nothing."""

import time

import yaml

from robot_memory.msg import IdentityStatus
from robot_memory.store import MemoryStore

from ros.conftest import BOTH_PROCESS_MODES, stack_log, wait_until


def assert_store_untouched(db_url):
    store = MemoryStore(db_url)
    assert store.identities() == []


@BOTH_PROCESS_MODES
def test_wrong_certified_hash_gives_mismatch_and_no_writes(probe, start_stack, db_url):
    stack = start_stack(certified_hash="0" * 64)
    status = probe.wait_identity()
    assert status.state == IdentityStatus.MISMATCH
    assert "certified hash is " + "0" * 64 in status.reason
    assert probe.grounding.wait_for_service(30)
    # Until the server has seen the status it answers "waiting"; then it names MISMATCH.
    answer = wait_until(lambda: (a := probe.grounding.query("manipulation.grasp", "glass_cup"))
                        and "MISMATCH" in a.reason and a, 10, "the server to learn MISMATCH")
    assert answer.status == "IDENTITY_UNVERIFIED" and answer.facts == ()
    for i in range(5):
        probe.publish_result(stamp_s=1 + i)
    time.sleep(1.5)  # several flush and pass periods
    assert probe.results.get_subscription_count() == 0  # the logger refused to subscribe
    assert_store_untouched(db_url)
    wait_until(lambda: "refusing to write or serve: identity MISMATCH" in stack_log(stack), 10,
               "the refusal in the nodes' logs")


def test_changed_manifest_field_gives_mismatch(probe, start_stack, manifest_file, db_url):
    data = yaml.safe_load(manifest_file.read_text())
    data["policy_version"] = "grasp-policy-9.9.9"  # an uncertified change of who the robot is
    manifest_file.write_text(yaml.safe_dump(data))
    start_stack()
    assert probe.wait_identity().state == IdentityStatus.MISMATCH
    assert_store_untouched(db_url)


def test_unknown_manifest_field_gives_invalid_manifest(probe, start_stack, manifest_file, db_url):
    manifest_file.write_text(manifest_file.read_text() + "favourite_colour: blue\n")
    stack = start_stack()
    status = probe.wait_identity()
    assert status.state == IdentityStatus.INVALID_MANIFEST
    assert "favourite_colour: unknown field" in status.reason
    wait_until(lambda: "INVALID_MANIFEST" in stack_log(stack), 10, "the reason in the log")
    assert_store_untouched(db_url)

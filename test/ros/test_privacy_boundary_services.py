"""The privacy boundary over DDS, past execution results: an override whose text looks
like a secret or personal data is refused by the consolidator's `override` service with
the privacy reason, counted on /diagnostics and logged as a privacy_rejection event; a
`ground` request is answered as always, and its consultation record keeps a sensitive
requester or intent id as its category only. The secrets are nowhere in the store."""

from pathlib import Path

from robot_memory.event_kinds import FACT_CONSULTATION, OVERRIDE, PRIVACY_REJECTION
from robot_memory.msg import IdentityStatus
from robot_memory.srv import GroundingQuery, Override
from robot_memory.store import MemoryStore
from helpers import result_event

from ros.conftest import wait_until
from ros.test_governance import wait_active

SECRET = "jane.doe@example.org"
PHONE = "+44 20 7946 0958"


def test_overrides_and_consultations_pass_the_privacy_boundary(probe, start_stack,
                                                               certified_hash, db_url):
    part = MemoryStore(db_url).partition(certified_hash)
    part.append_many([result_event(i) for i in range(8)])
    start_stack()
    assert probe.wait_identity().state == IdentityStatus.VERIFIED
    wait_active(probe, "consolidator")
    for request, field in (
            # Signed: the operator is the key's; the texts the request brings are screened.
            (Override.Request(action=Override.Request.ACTION_FREEZE,
                              reason=f"maintenance, ask {SECRET}"), "reason"),
            (Override.Request(action=Override.Request.ACTION_OPERATOR_FACT, reason="weighed",
                              kind="object_property", key="glass_cup",
                              value_json='{"mass_kg": 0.3, "by": "%s"}' % SECRET), "value")):
        refused = probe.call_signed(Override, "override", request)
        assert not refused.success and refused.reason == (
            f"{field}: looks like email; refused at the privacy boundary (privacy_email)")
    wait_until(lambda: (d := probe.diagnostics.get("consolidator")) and
               d.get("refused.privacy_email") == "2", 20, "the consolidator's count")

    wait_active(probe, "grounding_server")
    answer = probe.call(GroundingQuery, "ground", GroundingQuery.Request(
        skill_id="manipulation.grasp", target_class="glass_cup", environment="sim_relaxed",
        requester=SECRET, intent_id=f"call {PHONE}"))
    assert answer.status != GroundingQuery.Response.INVALID_REQUEST and answer.consultation_id
    records = wait_until(lambda: [e.payload for e in part.events([FACT_CONSULTATION])
                                  if e.payload["consultation_id"] == answer.consultation_id],
                         20, "the consultation record")
    assert (records[0]["requester"], records[0]["intent_id"]) == \
        ("[refused: privacy_email]", "[refused: privacy_phone_number]")
    assert [(e.payload["source"], e.payload["field"], e.payload["category"])
            for e in part.events([PRIVACY_REJECTION])] == [
        ("override", "reason", "email"), ("override", "value", "email"),
        ("ground", "requester", "email"), ("ground", "intent_id", "phone_number")]
    wait_until(lambda: (d := probe.diagnostics.get("grounding_server")) and
               d.get("audit_redacted.privacy_email") == "1" and
               d.get("audit_redacted.privacy_phone_number") == "1", 20, "the server's count")
    assert part.count_events(OVERRIDE) == 0
    part.store.close()
    path = Path(db_url.removeprefix("sqlite:///"))
    raw = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    assert SECRET.encode() not in raw and b"7946" not in raw

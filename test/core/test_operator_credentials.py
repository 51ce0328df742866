"""Operator credentials (robot_memory.operation.operator_credentials): a request signed by a
configured operator is accepted once, with the operator's name from the key; everything
else is refused with its reason and counted. Real keys, a clock the test moves."""

import base64
import re
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from robot_memory.operation.operator_credentials import (BAD_SIGNATURE, BEFORE_START, EXPIRED,
                                                         FUTURE, KEYS_INVALID, MALFORMED, MISSING,
                                                         NO_KEYS, OPERATOR_MISMATCH, REPLAYED,
                                                         REQUEST_FIELDS, UNKNOWN_KEY,
                                                         CredentialRefused, CredentialVerifier,
                                                         OperatorKeysError, key_line,
                                                         load_operator_keys, request_document,
                                                         sign_request)

SERVICE = "/robot_7/override"
FREEZE = {"action": "freeze", "operator_name": "", "reason": "inspection", "fact_id": 0,
          "kind": "", "key": "", "value_json": "", "confidence": 0.0, "archive_path": ""}
S = 1_000_000_000


class Clock:
    def __init__(self, now_ns: int = 1_800_000_000 * S):
        self.now = now_ns

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def alice():
    return Ed25519PrivateKey.generate()


@pytest.fixture
def clock():
    return Clock()


def verifier_for(clock, *keys, window_s=60.0):
    return CredentialVerifier([key_line(name, key.public_key()) for name, key in keys],
                              window_s=window_s, clock=clock)


def refused(verifier, credential, fields=FREEZE, service=SERVICE, srv_type="Override"):
    with pytest.raises(CredentialRefused) as caught:
        verifier.verify(service, srv_type, fields, credential)
    return caught.value


def test_a_signed_request_is_accepted_once_and_names_its_operator(alice, clock):
    verifier = verifier_for(clock, ("alice", alice))
    credential = sign_request(alice, SERVICE, "Override", FREEZE, clock())
    clock.now += 5 * S
    operator = verifier.verify(SERVICE, "Override", FREEZE, credential)
    assert operator.name == "alice" and credential.split(".")[1] == operator.key_id
    again = refused(verifier, credential)
    assert again.reason == REPLAYED and "accepted already" in again.detail
    assert verifier.accepted == 1 and verifier.refused == {REPLAYED: 1}


def test_another_operators_key_is_refused(alice, clock):
    bob = Ed25519PrivateKey.generate()
    verifier = verifier_for(clock, ("alice", alice))
    exc = refused(verifier, sign_request(bob, SERVICE, "Override", FREEZE, clock()))
    assert exc.reason == UNKNOWN_KEY and "not one of this node's operator keys" in exc.detail


def test_a_key_listed_under_another_name_signs_as_that_name(alice, clock):
    bob = Ed25519PrivateKey.generate()
    verifier = verifier_for(clock, ("alice", alice), ("bob", bob))
    claims_alice = {**FREEZE, "operator_name": "alice"}
    exc = refused(verifier, sign_request(bob, SERVICE, "Override", claims_alice, clock()),
                  claims_alice)
    assert exc.reason == OPERATOR_MISMATCH and "'bob'" in exc.detail
    for claimed in ("", "bob"):
        fields = {**FREEZE, "operator_name": claimed}
        credential = sign_request(bob, SERVICE, "Override", fields, clock())
        assert verifier.verify(SERVICE, "Override", fields, credential).name == "bob"
    assert verifier.refused == {OPERATOR_MISMATCH: 1} and verifier.accepted == 2


@pytest.mark.parametrize("field, value", [
    ("action", "reset_semantic"), ("reason", "inspection!"), ("operator_name", "alice"),
    ("fact_id", 7), ("kind", "zone_risk"), ("key", "k"), ("value_json", "{}"),
    ("confidence", 0.5), ("archive_path", "x.json")])
def test_every_field_is_signed(alice, clock, field, value):
    verifier = verifier_for(clock, ("alice", alice))
    credential = sign_request(alice, SERVICE, "Override", FREEZE, clock())
    exc = refused(verifier, credential, {**FREEZE, field: value})
    assert exc.reason == BAD_SIGNATURE and SERVICE in exc.detail
    assert verifier.verify(SERVICE, "Override", FREEZE, credential).name == "alice"


def test_the_service_name_is_signed(alice, clock):
    verifier = verifier_for(clock, ("alice", alice))
    credential = sign_request(alice, "/robot_8/override", "Override", FREEZE, clock())
    assert refused(verifier, credential).reason == BAD_SIGNATURE
    manage = sign_request(alice, SERVICE, "ManageNodes", {"command": 1}, clock())
    # A ManageNodes credential never passes for an Override of the same name.
    assert refused(verifier, manage).reason == BAD_SIGNATURE


def test_a_tampered_signature_is_refused(alice, clock):
    verifier = verifier_for(clock, ("alice", alice))
    credential = sign_request(alice, SERVICE, "Override", FREEZE, clock())
    head, signature = credential.rsplit(".", 1)
    raw = bytearray(base64.urlsafe_b64decode(signature + "=="))
    raw[10] ^= 1
    forged = f"{head}.{base64.urlsafe_b64encode(bytes(raw)).decode().rstrip('=')}"
    assert refused(verifier, forged).reason == BAD_SIGNATURE
    nonce = credential.split(".")[3]
    other_nonce = credential.replace(nonce, "0" * 32)
    assert refused(verifier, other_nonce).reason == BAD_SIGNATURE


def test_expired_and_future_credentials_are_refused(alice, clock):
    verifier = verifier_for(clock, ("alice", alice), window_s=60.0)
    old = sign_request(alice, SERVICE, "Override", FREEZE, clock())
    clock.now += 61 * S
    exc = refused(verifier, old)
    assert exc.reason == EXPIRED and "61.0 s ago" in exc.detail
    future = sign_request(alice, SERVICE, "Override", FREEZE, clock() + 90 * S)
    exc = refused(verifier, future)
    assert exc.reason == FUTURE and "clock is ahead" in exc.detail
    near = sign_request(alice, SERVICE, "Override", FREEZE, clock() + 30 * S)
    assert verifier.verify(SERVICE, "Override", FREEZE, near).name == "alice"


def test_a_replayed_nonce_is_refused_until_its_window_ends(alice, clock):
    verifier = verifier_for(clock, ("alice", alice), window_s=10.0)
    nonce = "ab" * 16
    first = sign_request(alice, SERVICE, "Override", FREEZE, clock(), nonce=nonce)
    verifier.verify(SERVICE, "Override", FREEZE, first)
    clock.now += 2 * S  # same nonce, new signature and time: still a replay
    second = sign_request(alice, SERVICE, "Override", FREEZE, clock(), nonce=nonce)
    assert refused(verifier, second).reason == REPLAYED


def test_a_credential_issued_before_the_node_started_is_refused(alice, clock):
    """What a restart does: the nonces are forgotten, so the new verifier refuses
    everything issued before it started, however recent."""
    before = sign_request(alice, SERVICE, "Override", FREEZE, clock())
    clock.now += 1 * S
    restarted = verifier_for(clock, ("alice", alice))
    exc = refused(restarted, before)
    assert exc.reason == BEFORE_START and "restart" in exc.detail


def test_no_keys_configured_refuses_everything_and_says_how(alice, clock):
    verifier = CredentialVerifier([], "", clock=clock)
    exc = refused(verifier, sign_request(alice, SERVICE, "Override", FREEZE, clock()))
    assert exc.reason == NO_KEYS and "robot-memory keygen --operator" in exc.detail
    assert "operator_keys" in exc.detail and "docs/security.md" in exc.detail
    assert verifier.describe_keys().startswith("none")
    assert verifier.refused == {NO_KEYS: 1}


def test_missing_and_malformed_credentials(alice, clock):
    verifier = verifier_for(clock, ("alice", alice))
    assert refused(verifier, "").reason == MISSING
    assert "robot-memory sign" in refused(verifier, "").detail
    for bad in ("x", "rmop1.zz", "rmop1." + "a" * 600):
        assert refused(verifier, bad).reason == MALFORMED
    assert verifier.refused == {MISSING: 2, MALFORMED: 3}


def test_unreadable_keys_refuse_everything(tmp_path, alice, clock):
    keys = tmp_path / "operator_keys"
    keys.write_text("# operators\nalice not-base64\n")
    verifier = CredentialVerifier([], str(keys), clock=clock)
    exc = refused(verifier, sign_request(alice, SERVICE, "Override", FREEZE, clock()))
    assert exc.reason == KEYS_INVALID and "line 2" in exc.detail
    missing = CredentialVerifier([], str(tmp_path / "none"), clock=clock)
    assert "cannot read" in missing.problem
    keys.write_text(key_line("alice", alice.public_key()) + "\n")
    keys.chmod(0o666)  # anyone could add themselves as an operator
    exc = refused(CredentialVerifier([], str(keys), clock=clock),
                  sign_request(alice, SERVICE, "Override", FREEZE, clock()))
    assert exc.reason == KEYS_INVALID and "chmod go-w" in exc.detail
    keys.chmod(0o644)
    assert CredentialVerifier([], str(keys), clock=clock).keys


def test_key_file_lines(tmp_path, alice):
    bob = Ed25519PrivateKey.generate()
    keys = tmp_path / "operator_keys"
    keys.write_text(f"# who may change what the robot knows\n\n{key_line('bob', bob.public_key())}"
                    "  # night shift\n")
    loaded = load_operator_keys([key_line("alice", alice.public_key())], str(keys))
    assert sorted(k.name for k in loaded.values()) == ["alice", "bob"]
    for lines, words in [(["alice"], "NAME BASE64"), (["al ice x"], "NAME BASE64"),
                         (["alice AAAA"], "32-byte"),
                         ([key_line("alice", alice.public_key()),
                           key_line("alice", bob.public_key())], "twice"),
                         ([key_line("alice", alice.public_key()),
                           key_line("carol", alice.public_key())], "twice")]:
        with pytest.raises(OperatorKeysError, match=words):
            load_operator_keys(lines)


def test_request_document_covers_exactly_the_srv_fields():
    """REQUEST_FIELDS is each srv file's request part, credential excepted: a field added
    to a srv file and not here would fail this test (and every request at the node)."""
    srv = Path(__file__).resolve().parents[2] / "srv"
    for srv_type, schema in REQUEST_FIELDS.items():
        request_part = (srv / f"{srv_type}.srv").read_text().split("---")[0]
        fields = [m.group(2) for m in re.finditer(r"^([\w/\[\]<=]+)\s+(\w+)\s*$",
                                                  request_part, re.MULTILINE)]
        assert fields == [*schema, "credential"], srv_type
    with pytest.raises(ValueError, match="not in the signed set"):
        request_document("Override", {**FREEZE, "extra": 1})
    assert request_document("Override", {"confidence": 1})["confidence"] == 1.0
    assert request_document("ManageNodes", {}) == {"command": 0, "node_names": []}


def test_the_command_line_signs_what_a_node_accepts(tmp_path, capsys):
    """`robot-memory keygen --operator` prints the key's operator_keys line, and `sign`
    the request with a credential that line accepts, for the service it names."""
    import json

    from robot_memory.cli import main
    assert main(["keygen", "--out", str(tmp_path / "carol"), "--operator", "carol"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("carol ")
    verifier = CredentialVerifier([line])
    assert main(["sign", "override", "--key", str(tmp_path / "carol"), "--namespace", "r7",
                 "--action", "operator_fact", "--reason", "bench", "--kind", "zone_risk",
                 "--fact-key", "shelf_b", "--value", '{"risk": 0.2}', "--confidence",
                 "1"]) == 0
    request = json.loads(capsys.readouterr().out)
    credential = request.pop("credential")
    assert request["confidence"] == 1.0 and request["key"] == "shelf_b"
    assert verifier.verify("/r7/override", "Override", request, credential).name == "carol"
    assert main(["sign", "manage-nodes", "--key", str(tmp_path / "carol"), "--command",
                 "resume", "--node", "consolidator", "--credential-only"]) == 0
    credential = capsys.readouterr().out.strip()
    fields = {"command": 2, "node_names": ["consolidator"]}
    assert verifier.verify("/manifest_verifier/manage_nodes", "ManageNodes", fields,
                           credential).name == "carol"
    with pytest.raises(CredentialRefused):  # signed for the root namespace, not r7
        verifier.verify("/r7/manifest_verifier/manage_nodes", "ManageNodes", fields,
                        credential)

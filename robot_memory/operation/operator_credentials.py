"""Operator credentials: who may change what the robot knows or runs.

The services answer anyone on the DDS domain. The calls that change knowledge or node
state (`override`, `consolidate` when it applies, `manage_nodes`) must carry a
credential: an Ed25519 signature, made with an operator's private key, over the service
name, every other field of the request, the key's id, the time it was issued and a
random nonce. The node holds the operators' public keys (`operator_keys`, or
`operator_keys_file`: one `NAME BASE64-PUBLIC-KEY` a line) and accepts a credential
once (its nonce is remembered), within `window_s` of its issue time (wall clock), and
only if it was issued after the node started, so nothing signed before a restart is
accepted after it (the remembered nonces are gone with the process). The operator's
name is the one the key is listed under, never text the caller writes.

The credential is one line of text (`rmop1.<key id>.<issued ns>.<nonce>.<signature>`),
so it can be pasted into `ros2 service call`; `robot-memory sign` prints a signed
request. With no key configured, every such request is refused with a reason saying
how to configure one. ROS-free: a node passes the request's fields as a dict.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from robot_memory.canonical import canonical_json, sha256_hex
from robot_memory.errors import InputError

# Signed bytes start with this: a credential's signature can never pass for a signed
# checkpoint (witness.SIGNING_CONTEXT) or anything else made with the same key.
SIGNING_CONTEXT = b"robot_memory operator request v1\n"
PREFIX = "rmop1"
MAX_CREDENTIAL = 512  # characters; a credential is about 160

# Every field of each signed request (the srv files' request fields, credential
# excepted), with its default: a value is taken as the default's type, so `1` and `1.0`
# sign the same confidence. A field the request has and this table lacks is refused:
# nothing of a request goes unsigned.
REQUEST_FIELDS: dict[str, dict[str, Any]] = {
    "Override": {"action": "", "operator_name": "", "reason": "", "fact_id": 0, "kind": "",
                 "key": "", "value_json": "", "confidence": 0.0, "archive_path": ""},
    "Consolidate": {"dry_run": False},
    "ManageNodes": {"command": 0, "node_names": []},
}

# Why a request was refused: the codes counted on /diagnostics.
NO_KEYS = "no_operator_keys"
KEYS_INVALID = "operator_keys_invalid"
MISSING = "missing"
MALFORMED = "malformed"
UNKNOWN_KEY = "unknown_key"
BAD_SIGNATURE = "bad_signature"
EXPIRED = "expired"
FUTURE = "issued_in_future"
BEFORE_START = "issued_before_start"
REPLAYED = "replayed"
OPERATOR_MISMATCH = "operator_mismatch"
REFUSAL_CODES = (NO_KEYS, KEYS_INVALID, MISSING, MALFORMED, UNKNOWN_KEY, BAD_SIGNATURE,
                 EXPIRED, FUTURE, BEFORE_START, REPLAYED, OPERATOR_MISMATCH)

HOW_TO_CONFIGURE = ("configure operator keys: `robot-memory keygen --operator NAME --out "
                    "FILE` prints a line for the operator_keys parameter (or a line of the "
                    "operator_keys_file), then sign requests with `robot-memory sign`; see "
                    "docs/security.md#operator-credentials")

_NAME = re.compile(r"^[A-Za-z0-9_.@+-]{1,64}$")
_CREDENTIAL = re.compile(r"^rmop1\.([0-9a-f]{16})\.([0-9]{1,20})\.([0-9a-f]{32})\."
                         r"([A-Za-z0-9_-]{86})$")


class OperatorKeysError(InputError):
    """Raised for an operator_keys entry or file that cannot be read: names the line."""


class CredentialRefused(InputError):
    """Raised when a request's credential is refused; `reason` is one of REFUSAL_CODES,
    `detail` says why and what to do."""

    def __init__(self, code: str, detail: str):
        super().__init__("credential", code, detail)


@dataclass(frozen=True)
class OperatorKey:
    """One operator: the name the key is listed under, the key and its id."""

    name: str
    public_key: Ed25519PublicKey
    key_id: str


# -- keys -----------------------------------------------------------------------------
def _raw(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(public_key: Ed25519PublicKey) -> str:
    """A short name of a public key (first 16 hex digits of SHA-256 of its raw bytes); the
    same for an operator's key and a checkpoint key (evidence/witness.py)."""
    return sha256_hex(_raw(public_key).hex())[:16]


def check_name(name: str) -> str:
    """`name` if it can name an operator, else OperatorKeysError."""
    if not _NAME.match(name):
        raise OperatorKeysError("operator", "invalid_name",
                                f"{name!r}: 1-64 letters, digits or _ . @ + -")
    return name


def key_line(name: str, public_key: Ed25519PublicKey) -> str:
    """The operator_keys entry of an operator: `NAME BASE64-RAW-PUBLIC-KEY`."""
    check_name(name)
    return f"{name} {base64.b64encode(_raw(public_key)).decode('ascii')}"


def parse_key_lines(lines: Iterable[str], where: str) -> dict[str, OperatorKey]:
    """key id -> OperatorKey from `NAME BASE64` lines (blank lines and `#` comments
    skipped); a bad line, a name or a key listed twice is refused, naming the line."""
    keys: dict[str, OperatorKey] = {}
    names: set[str] = set()
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        at = f"{where} line {number}"
        parts = text.split()
        if len(parts) != 2 or not _NAME.match(parts[0]):
            raise OperatorKeysError(at, "bad_line", "expected `NAME BASE64-PUBLIC-KEY` (a "
                                    "name of 1-64 letters, digits or _ . @ + -)")
        name, encoded = parts
        try:
            raw = base64.b64decode(encoded, validate=True)
            public_key = Ed25519PublicKey.from_public_bytes(raw)
        except (binascii.Error, ValueError) as exc:
            raise OperatorKeysError(at, "bad_key", f"{name}: not the base64 of a 32-byte "
                                    "Ed25519 public key") from exc
        ident = key_id(public_key)
        if name in names or ident in keys:
            raise OperatorKeysError(at, "duplicate", f"{name}: the name or key is listed "
                                    "twice")
        names.add(name)
        keys[ident] = OperatorKey(name, public_key, ident)
    return keys


def load_operator_keys(entries: Iterable[str], path: str = "") -> dict[str, OperatorKey]:
    """The operators of the `operator_keys` parameter and the `operator_keys_file`."""
    lines = list(entries)
    where = "operator_keys"
    if path:
        try:
            mode = Path(path).stat().st_mode
            lines += Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise OperatorKeysError("operator_keys_file", "unreadable",
                                    f"cannot read {path}: {exc}") from exc
        # Whoever may write the file may make themselves an operator.
        if mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise OperatorKeysError("operator_keys_file", "writable_by_others",
                                    f"{path} is writable by group or others (mode "
                                    f"{stat.S_IMODE(mode):04o}); chmod go-w it")
        where = f"operator_keys + {path}"
    return parse_key_lines(lines, where)


# -- what is signed -------------------------------------------------------------------
def request_document(srv_type: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The request's fields as signed: every field of REQUEST_FIELDS[srv_type], each
    taken as its default's type; an unknown field raises ValueError."""
    try:
        schema = REQUEST_FIELDS[srv_type]
    except KeyError:
        raise ValueError(f"{srv_type!r} is not a signed request type "
                         f"({sorted(REQUEST_FIELDS)})") from None
    unknown = sorted(set(fields) - set(schema))
    if unknown:
        raise ValueError(f"{srv_type}: fields {unknown} are not in the signed set")
    document = {}
    for name, default in schema.items():
        value = fields.get(name, default)
        if isinstance(default, list):
            document[name] = [str(item) for item in value]
        elif isinstance(default, bool):
            document[name] = bool(value)
        else:
            document[name] = type(default)(value)
    return document


def signed_bytes(service: str, srv_type: str, fields: dict[str, Any], ident: str,
                 issued_ns: int, nonce: str) -> bytes:
    return SIGNING_CONTEXT + canonical_json({
        "service": service, "type": srv_type, "request": request_document(srv_type, fields),
        "key_id": ident, "issued_ns": int(issued_ns), "nonce": nonce}).encode("utf-8")


def sign_request(private_key: Ed25519PrivateKey, service: str, srv_type: str,
                 fields: dict[str, Any], issued_ns: int | None = None,
                 nonce: str | None = None) -> str:
    """The credential for one request to `service` (its full name, namespace included,
    e.g. /robot_7/override), issued now unless told."""
    ident = key_id(private_key.public_key())
    issued_ns = time.time_ns() if issued_ns is None else int(issued_ns)
    nonce = secrets.token_hex(16) if nonce is None else nonce
    signature = private_key.sign(signed_bytes(service, srv_type, fields, ident, issued_ns,
                                              nonce))
    encoded = base64.urlsafe_b64encode(signature).decode("ascii").rstrip("=")
    return f"{PREFIX}.{ident}.{issued_ns}.{nonce}.{encoded}"


# -- checking -------------------------------------------------------------------------
class CredentialVerifier:
    """What a node checks a request's credential with: its operators' keys, the time
    window and the nonces it accepted in it. One per node; not thread-safe on its own
    (each node checks in its one executor thread)."""

    def __init__(self, entries: Iterable[str] = (), path: str = "", window_s: float = 60.0,
                 clock: Callable[[], int] = time.time_ns):
        self.window_ns = int(window_s * 1e9)
        self._clock = clock
        self.started_ns = clock()
        self.keys: dict[str, OperatorKey] = {}
        self.problem = ""  # why the configured keys could not be read
        try:
            self.keys = load_operator_keys(entries, path)
        except OperatorKeysError as exc:
            self.problem = str(exc)
        self._nonces: dict[str, int] = {}  # nonce -> when it may be forgotten (ns)
        self.accepted = 0
        self.refused: dict[str, int] = {}  # refusal code -> count

    def describe_keys(self) -> str:
        """For /diagnostics: the operators, or why none is accepted."""
        if self.problem:
            return f"none accepted: {self.problem}"
        if not self.keys:
            return "none: every mutating request is refused"
        return ", ".join(sorted(key.name for key in self.keys.values()))

    def verify(self, service: str, srv_type: str, fields: dict[str, Any],
               credential: str) -> OperatorKey:
        """The operator who signed this request, or CredentialRefused (counted). A request
        with an `operator_name` field (Override, kept for compatibility) must leave it
        empty or give the key's name."""
        try:
            operator = self._verify(service, srv_type, fields, credential)
        except CredentialRefused as exc:
            self.refused[exc.reason] = self.refused.get(exc.reason, 0) + 1
            raise
        self.accepted += 1
        return operator

    def _verify(self, service: str, srv_type: str, fields: dict[str, Any],
                credential: str) -> OperatorKey:
        if self.problem:
            raise CredentialRefused(KEYS_INVALID, f"operator keys cannot be read ("
                                    f"{self.problem}); every mutating request is refused "
                                    "until they are fixed and the node restarted")
        if not self.keys:
            raise CredentialRefused(NO_KEYS, f"no operator keys configured, so no request "
                                    f"that changes the robot's knowledge or nodes is "
                                    f"accepted; {HOW_TO_CONFIGURE}")
        if not credential:
            raise CredentialRefused(MISSING, f"{service} changes the robot's knowledge or "
                                    "nodes and needs an operator's signature: `robot-memory "
                                    "sign` prints the request with its credential")
        match = _CREDENTIAL.match(credential) if len(credential) <= MAX_CREDENTIAL else None
        if match is None:
            raise CredentialRefused(MALFORMED, "not a credential of `robot-memory sign` "
                                    "(rmop1.<key id>.<issued ns>.<nonce>.<signature>)")
        ident, issued, nonce, encoded = match.groups()
        operator = self.keys.get(ident)
        if operator is None:
            raise CredentialRefused(UNKNOWN_KEY, f"key {ident} is not one of this node's "
                                    "operator keys")
        try:
            document = signed_bytes(service, srv_type, fields, ident, int(issued), nonce)
            operator.public_key.verify(base64.urlsafe_b64decode(encoded + "=="), document)
        except (InvalidSignature, ValueError) as exc:
            raise CredentialRefused(BAD_SIGNATURE, f"signature of key {ident} ({operator.name})"
                                    f" does not match this request to {service}: it was "
                                    "signed for another service or other field values") \
                from exc
        self._check_time(int(issued))
        claimed = str(fields.get("operator_name", ""))
        if claimed and claimed != operator.name:
            raise CredentialRefused(OPERATOR_MISMATCH, f"operator_name {claimed!r} is not "
                                    f"the operator of the signing key ({operator.name!r}); "
                                    "leave it empty or write that name")
        now = self._clock()
        for old in [n for n, forget_at in self._nonces.items() if forget_at < now]:
            del self._nonces[old]
        if nonce in self._nonces:
            raise CredentialRefused(REPLAYED, f"this credential (nonce {nonce[:8]}...) was "
                                    "accepted already; sign each request anew")
        self._nonces[nonce] = int(issued) + self.window_ns
        return operator

    def _check_time(self, issued_ns: int) -> None:
        now = self._clock()
        window_s = self.window_ns / 1e9
        if issued_ns < self.started_ns:
            raise CredentialRefused(BEFORE_START, "issued before this node started (a "
                                    "credential is never accepted across a restart); sign "
                                    "the request anew")
        if now - issued_ns > self.window_ns:
            raise CredentialRefused(EXPIRED, f"issued {(now - issued_ns) / 1e9:.1f} s ago, "
                                    f"more than operator_credential_window_s ({window_s:g} s)"
                                    "; sign the request anew (and check both clocks)")
        if issued_ns - now > self.window_ns:
            raise CredentialRefused(FUTURE, f"issued {(issued_ns - now) / 1e9:.1f} s in the "
                                    f"future, more than operator_credential_window_s "
                                    f"({window_s:g} s): the signer's clock is ahead")

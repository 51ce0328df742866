"""Signed checkpoints kept outside the store, so that a rewrite of the whole store is seen.

The hash chain catches an edit that does not repair the chain. Someone who can write
the database can repair it: recompute every hash, move the head, refresh
`verified_checkpoints`. Transparency logs (Certificate Transparency, Trillian, Tessera)
close that gap by signing the log head with a key the log does not hold and handing the
signed head to a witness outside the log. We do the same: the verifier signs
`(identity_hash, seq, event_hash, time_ns)` with an Ed25519 key kept in a file (never in
the store) and appends the signed checkpoint to a witness file (JSON lines, fsync'd).
Later the chain must still extend the newest signed checkpoint.
"""

from __future__ import annotations

import base64
import json
import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sqlalchemy import select

from robot_memory.canonical import canonical_json
from robot_memory.errors import InputError, StoreIntegrityError
# The same short name of a key as operators' credentials use.
from robot_memory.operation.operator_credentials import key_id
from robot_memory.store import Partition, compactions
from robot_memory.store.schema import events

# Signed bytes start with this, so a checkpoint signature can never be replayed as
# a signature over anything else made with the same key.
SIGNING_CONTEXT = b"robot_memory checkpoint v1\n"


class WitnessError(InputError):
    """Raised when a key file is missing, unreadable, not an Ed25519 key or readable by
    group/others, or when a witness file cannot be read or written."""


class WitnessLineError(StoreIntegrityError):
    """Raised for a witness line that is not JSON, lacks fields, names another identity
    or has a bad signature."""


@dataclass(frozen=True)
class Checkpoint:
    """One chain head at one moment: what is signed."""

    identity_hash: str
    seq: int
    event_hash: str
    time_ns: int

    def signed_bytes(self) -> bytes:
        return SIGNING_CONTEXT + canonical_json(asdict(self)).encode("utf-8")


@dataclass(frozen=True)
class SignedCheckpoint:
    checkpoint: Checkpoint
    key_id: str
    signature: str  # base64 of the 64-byte Ed25519 signature

    def to_line(self) -> str:
        return canonical_json({**asdict(self.checkpoint), "key_id": self.key_id,
                               "signature": self.signature})


# -- keys ---------------------------------------------------------------------------
def generate_key_pair(prefix: str | Path) -> tuple[Path, Path]:
    """Write a new private key to PREFIX (mode 0600, refused if it exists) and its
    public key to PREFIX.pub (mode 0644)."""
    private_path, public_path = Path(prefix), Path(f"{prefix}.pub")
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
    public_pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
    for path in (private_path, public_path):
        if path.exists():
            raise WitnessError(f"{path} already exists; not overwriting a key")
    # O_EXCL with mode 0600: the private key is never readable by others, not even briefly.
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(private_pem)
        os.fchmod(handle.fileno(), 0o600)  # umask cannot widen it, but may narrow: pin it
    fd = os.open(public_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(public_pem)
        os.fchmod(handle.fileno(), 0o644)
    return private_path, public_path


def load_private_key(path: str | Path) -> Ed25519PrivateKey:
    """The signing key; refused when group or others may read or write the file."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
        data = path.read_bytes()
    except OSError as exc:
        raise WitnessError(f"cannot read key file {path}: {exc.strerror}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise WitnessError(f"key file {path} is accessible by group or others (mode "
                           f"{stat.S_IMODE(mode):04o}); chmod 600 it")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise WitnessError(f"key file {path} is not an unencrypted PEM private key") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise WitnessError(f"key file {path} is not an Ed25519 key")
    return key


def load_public_key(path: str | Path) -> Ed25519PublicKey:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WitnessError(f"cannot read public key file {path}: {exc.strerror}") from exc
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError as exc:
        raise WitnessError(f"public key file {path} is not a PEM public key") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise WitnessError(f"public key file {path} is not an Ed25519 key")
    return key


# -- signing and the witness file -----------------------------------------------------
def sign_checkpoint(key: Ed25519PrivateKey, checkpoint: Checkpoint) -> SignedCheckpoint:
    signature = key.sign(checkpoint.signed_bytes())
    return SignedCheckpoint(checkpoint, key_id(key.public_key()),
                            base64.b64encode(signature).decode("ascii"))


def append_to_witness(path: str | Path, signed: SignedCheckpoint) -> None:
    """Append one line and fsync it (and the folder when the file is new), so a
    checkpoint that was announced is on disk even after a power cut."""
    path = Path(path)
    new = not path.exists()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (signed.to_line() + "\n").encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        if new:
            folder = os.open(path.parent if str(path.parent) else ".", os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
    except OSError as exc:
        raise WitnessError(f"cannot append to witness file {path}: {exc.strerror}") from exc


def head_checkpoint(partition: Partition, time_ns: int) -> Checkpoint:
    seq, event_hash = partition.head()
    return Checkpoint(partition.identity_hash, seq, event_hash, int(time_ns))


def checkpoint_head(partition: Partition, key: Ed25519PrivateKey, witness_path: str | Path,
                    time_ns: int) -> SignedCheckpoint:
    """Sign the chain's current head and append it to the witness file."""
    signed = sign_checkpoint(key, head_checkpoint(partition, time_ns))
    append_to_witness(witness_path, signed)
    return signed


def parse_line(line: str, public_key: Ed25519PublicKey, where: str,
               identity_hash: str | None = None) -> SignedCheckpoint:
    """One witness line, its identity (when given) and signature checked;
    WitnessLineError says what is wrong."""
    try:
        data = json.loads(line)
        checkpoint = Checkpoint(str(data["identity_hash"]), int(data["seq"]),
                                str(data["event_hash"]), int(data["time_ns"]))
        signed = SignedCheckpoint(checkpoint, str(data["key_id"]), str(data["signature"]))
        signature = base64.b64decode(signed.signature, validate=True)
    except (ValueError, KeyError, TypeError) as exc:
        raise WitnessLineError(f"{where}: not a signed checkpoint ({exc})") from exc
    if set(data) != {"identity_hash", "seq", "event_hash", "time_ns", "key_id", "signature"}:
        raise WitnessLineError(f"{where}: unexpected fields {sorted(data)}")
    # The identity first: a line from another robot is named as such, not as a bad key.
    if identity_hash is not None and checkpoint.identity_hash != identity_hash:
        raise WitnessLineError(f"{where}: signed for identity {checkpoint.identity_hash[:12]}"
                               f", not this robot's {identity_hash[:12]} (another robot's "
                               "witness)")
    try:
        public_key.verify(signature, checkpoint.signed_bytes())
    except InvalidSignature as exc:
        raise WitnessLineError(f"{where}: bad signature (line edited, or signed by "
                               f"key {signed.key_id}, not {key_id(public_key)})") from exc
    return signed


def read_witness(path: str | Path, public_key: Ed25519PublicKey, identity_hash: str,
                 newest: int | None = None) -> list[SignedCheckpoint]:
    """The checkpoints of the file, each naming `identity_hash` and each signature
    checked; with `newest`, only the last `newest` lines are read, so that a boot check
    stays bounded however long the file grows (a signature check is not free:
    docs/performance.md, "Why the code is shaped this way").
    WitnessLineError names the first line that fails."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise WitnessError(f"cannot read witness file {path}: {exc.strerror}") from exc
    found = []
    first = 0 if newest is None else max(0, len(lines) - newest)
    for number, line in enumerate(lines[first:], start=first + 1):
        if not line.strip():
            continue
        where = f"witness {path} line {number}"
        found.append(parse_line(line, public_key, where, identity_hash))
    return found


# -- checking a chain against its witness --------------------------------------------
@dataclass(frozen=True)
class WitnessVerdict:
    ok: bool
    message: str
    checkpoint: SignedCheckpoint | None = None  # the newest signed checkpoint
    # First chain position known to differ from what was signed (None when ok).
    divergent_seq: int | None = None


def check_against_witness(partition: Partition, checkpoints: list[SignedCheckpoint]
                          ) -> WitnessVerdict:
    """Does the chain still extend the newest signed checkpoint: the same event hash at
    its seq, and a head at or after it? On a mismatch, the older checkpoints narrow down
    where the history was rewritten: the first divergent seq is the first signed
    position the store disagrees with, after the newest one it still agrees with."""
    if not checkpoints:
        return WitnessVerdict(False, "the witness holds no signed checkpoint for identity "
                                     f"{partition.identity_hash[:12]}")
    newest = max(checkpoints, key=lambda s: (s.checkpoint.seq, s.checkpoint.time_ns))
    head_seq, _ = partition.head()
    signed_seqs = sorted({s.checkpoint.seq for s in checkpoints})
    with partition.store.read() as conn:
        stored = dict(conn.execute(select(events.c.seq, events.c.event_hash).where(
            events.c.identity_hash == partition.identity_hash,
            events.c.seq.in_(signed_seqs))).all())
        compacted = compactions(partition.identity_hash, conn)
    # A signed position a compaction removed: its cut's hash is in the compaction event
    # (which later checkpoints sign); any other is checked in its segment (verify
    # --archives), not here.
    for c in compacted:
        stored.setdefault(c.until_seq, c.cut_hash)
    archived = {seq for seq in signed_seqs if seq not in stored
                and any(c.covers(seq) for c in compacted)}
    name = _describe(newest)
    if head_seq < newest.checkpoint.seq:
        return WitnessVerdict(False, f"the store's head is seq {head_seq}, before {name} "
                                     "(rolled back to an older copy, or truncated); first "
                                     f"divergent seq {head_seq + 1}", newest, head_seq + 1)
    agreed, first_bad = 0, None
    for signed in sorted(checkpoints, key=lambda s: s.checkpoint.seq):
        cp = signed.checkpoint
        if cp.seq == 0 or cp.seq in archived:
            continue  # the empty chain, or an archived position: nothing live to compare
        if stored.get(cp.seq) == cp.event_hash:
            if first_bad is None:
                agreed = cp.seq
        elif first_bad is None:
            first_bad = signed
    if first_bad is None:
        return WitnessVerdict(True, f"the chain (head seq {head_seq}) extends {name}", newest)
    seq = first_bad.checkpoint.seq
    return WitnessVerdict(False, f"the store's event at seq {seq} is not the one signed in "
                                 f"{_describe(first_bad)} (history rewritten after seq "
                                 f"{agreed}); newest: {name}; first divergent seq {seq}",
                          newest, seq)


def _describe(signed: SignedCheckpoint) -> str:
    cp = signed.checkpoint
    return (f"signed checkpoint seq {cp.seq} hash {cp.event_hash[:12]} at time_ns "
            f"{cp.time_ns} (key {signed.key_id})")


# Witness lines whose signatures the verifier checks at boot (`verify --witness` checks all).
BOOT_WITNESS_LINES = 64


def verify_witness(partition: Partition, witness_path: str | Path,
                   public_key: Ed25519PublicKey, newest: int | None = None) -> WitnessVerdict:
    """read_witness + check_against_witness; a bad or foreign line is a failed verdict."""
    try:
        checkpoints = read_witness(witness_path, public_key, partition.identity_hash, newest)
    except WitnessLineError as exc:
        return WitnessVerdict(False, str(exc))
    return check_against_witness(partition, checkpoints)


# -- the verifier's policy -------------------------------------------------------------
class CheckpointWitness:
    """What the verifier does with a key file and a witness file, including when one is
    not configured: never a silent pass. `problem` refuses the boot (STORE_CORRUPTED);
    `warning` is reported (WARN on /diagnostics) and the robot goes on; `off` says that
    signed checkpoints are off by configuration (a key/value on /diagnostics, logged at
    boot, not a warning: the default configuration needs no human)."""

    def __init__(self, key_file: str, witness_file: str, require: bool):
        self.key: Ed25519PrivateKey | None = None
        self.path = Path(witness_file) if witness_file else None
        self.require = require
        self.problem = ""
        self.warning = ""
        self.off = ""
        missing = [name for name, value in (("checkpoint_key_file", key_file),
                                            ("witness_file", witness_file)) if not value]
        if missing:
            what = f"signed checkpoints off: {' and '.join(missing)} not set"
            if require:
                self.problem = what + " (require_witness is set)"
            else:
                self.off = what + " (a rewrite of the whole store would go unseen)"
            return
        try:
            self.key = load_private_key(key_file)  # a configured but unusable key refuses
        except WitnessError as exc:
            self.problem = str(exc)

    @property
    def enabled(self) -> bool:
        return self.key is not None

    def boot_check(self, partition: Partition) -> str:
        """Empty when the chain extends the newest signed checkpoint, else why not."""
        if self.problem or not self.enabled:
            return self.problem
        assert self.path is not None and self.key is not None
        try:
            empty = not self.path.exists() or not self.path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            return f"cannot read witness file {self.path}: {exc.strerror}"
        if empty:
            if self.require:
                return f"witness file {self.path} is missing or empty (require_witness is set)"
            self.warning = (f"witness file {self.path} was missing or empty at boot: a new "
                            "witness starts now (a deleted witness is not detected)")
            return ""
        try:
            verdict = verify_witness(partition, self.path, self.key.public_key(),
                                     BOOT_WITNESS_LINES)
        except WitnessError as exc:
            return str(exc)
        return "" if verdict.ok else f"witness check failed: {verdict.message}"

    def sign(self, partition: Partition, time_ns: int) -> SignedCheckpoint:
        assert self.path is not None and self.key is not None
        return checkpoint_head(partition, self.key, self.path, time_ns)

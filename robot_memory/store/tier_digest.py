"""The digest of an identity's semantic tier: what each `consolidation_run` event records
of the facts and states its pass left, so that the tier is as tamper-evident as the log.

For each of the two tables (`semantic_facts`, `consolidation_state`) the digest is the
number of rows and the sum, modulo 2^2048, of a 2048-bit hash of each row's canonical
bytes (SHA-256, expanded by SHAKE-256). A sum is fixed in size and updated in place: a
pass subtracts the rows it replaces and adds the rows it writes, never reading the rest
of the tier. The run event that holds it is chained, so the digest is attested like any
event.

Why 2048 bits and not 256: an additive hash of n bits falls to Wagner's generalized
birthday attack (an attacker who may alter k rows searches variants of each for a set
whose hashes sum to zero) in about k * 2^(n / (1 + lg k)) hashes: some 2^30 for n = 256
and the 10^4 rows of a robot's tier, beyond 2^90 for n = 2048 whatever k.

The boot check recomputes both sums from the stored rows and compares them with the
newest run's (store/tier_check.py).
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from robot_memory.event_kinds import CONSOLIDATION_RUN
from robot_memory.store.bulk import placeholder

DIGEST_BITS = 2048
_MODULUS = 1 << DIGEST_BITS
_DIGEST_BYTES = DIGEST_BITS // 8
_HEX_DIGITS = DIGEST_BITS // 4

# The run payload's key for the digest: sorted before "reset", so that the pass reads it
# with the run's other leading fields (consolidation/checkpoint.py).
RUN_DIGEST_KEY = "digest"
FACTS_TABLE, STATES_TABLE = "semantic_facts", "consolidation_state"


# A fact's numbers (confidence, n_observations, last supporting event id,
# last_updated_ns) as IEEE 754 double and int64s: a fixed 32 bytes, cheaper to hash than
# their text (docs/performance.md, "Why the code is shaped this way"). A value of another
# type (a row written by hand) is hashed as its repr, behind another tag, so it still
# counts, as something no pass writes.
_FACT_NUMBERS = struct.Struct("<dqqq")


def _expanded(canonical: bytes) -> int:
    """A row's 2048-bit hash: SHA-256 of its canonical bytes, expanded by SHAKE-256.
    SHA-256 first because, for a few hundred bytes, hardware SHA-256 reads them faster
    than SHAKE (docs/performance.md, "Why the code is shaped this way")."""
    return int.from_bytes(hashlib.shake_256(hashlib.sha256(canonical).digest())
                          .digest(_DIGEST_BYTES), "big")


def fact_row_hash(identity_hash: str, kind: str, key: str, value_json: str, status: str,
                  confidence: float, n_observations: int, rule_version: str,
                  last_supporting_event_id: int, last_updated_ns: int) -> int:
    """The hash of a semantic_facts row (all its columns but the row id, which is the
    store's and not the pass's), as an integer. Text fields go with their length in
    front (no separator a key could hold is needed), the value last."""
    try:
        numbers = b"\x00" + _FACT_NUMBERS.pack(confidence, n_observations,
                                               last_supporting_event_id, last_updated_ns)
    except (struct.error, TypeError):
        numbers = b"\x01" + repr((confidence, n_observations, last_supporting_event_id,
                                  last_updated_ns)).encode("utf-8") + b"\x00"
    text = (f"{identity_hash}\n{len(kind)}:{kind}{len(key)}:{key}{len(status)}:{status}"
            f"{len(rule_version)}:{rule_version}{value_json}")
    return _expanded(b"fact\n" + numbers + text.encode("utf-8"))


def state_row_hash(identity_hash: str, kind: str, key: str, state_json: str) -> int:
    """The hash of a consolidation_state row, as an integer."""
    return _expanded(f"state\n{identity_hash}\n{len(kind)}:{kind}{len(key)}:{key}"
                     f"{state_json}".encode("utf-8"))


def _hex(total: int) -> str:
    return f"{total % _MODULUS:0{_HEX_DIGITS}x}"


@dataclass
class TierDigest:
    """Row counts and hash sums of the two tables (sums kept unreduced while a pass adds
    to them; reduced when compared or written)."""

    fact_rows: int = 0
    fact_sum: int = 0
    state_rows: int = 0
    state_sum: int = 0

    def copy(self) -> TierDigest:
        return TierDigest(self.fact_rows, self.fact_sum, self.state_rows, self.state_sum)

    def facts_part(self) -> tuple[int, int]:
        return self.fact_rows, self.fact_sum % _MODULUS

    def states_part(self) -> tuple[int, int]:
        return self.state_rows, self.state_sum % _MODULUS

    def payload(self) -> dict[str, Any]:
        """As a run event records it."""
        return {"facts": {"rows": self.fact_rows, "sum": _hex(self.fact_sum)},
                "states": {"rows": self.state_rows, "sum": _hex(self.state_sum)}}

    @classmethod
    def of_payload(cls, payload: Any) -> TierDigest:
        """From a run event's record; ValueError if it is not one."""
        try:
            facts, states = payload["facts"], payload["states"]
            parts = [(facts["rows"], facts["sum"]), (states["rows"], states["sum"])]
            if any(type(rows) is not int or rows < 0 or type(text) is not str
                   or len(text) != _HEX_DIGITS for rows, text in parts):
                raise ValueError
            return cls(parts[0][0], int(parts[0][1], 16), parts[1][0], int(parts[1][1], 16))
        except (KeyError, TypeError, ValueError):
            raise ValueError("not a tier digest") from None


@dataclass(frozen=True)
class RecordedDigest:
    """The newest consolidation run and the digest it recorded (None: a run of a release
    before tier digests, or no run at all when run_seq is 0)."""

    run_seq: int
    run_event_id: int
    digest: TierDigest | None


def newest_run_digest(identity_hash: str, conn: Connection) -> RecordedDigest:
    """The digest the newest consolidation run recorded. ValueError if its record is
    there but unreadable."""
    mark = placeholder(conn)
    row = conn.exec_driver_sql(
        f"SELECT seq, id, payload_json FROM events WHERE identity_hash = {mark} AND kind = "
        f"{mark} AND kind <> 'execution_result' ORDER BY seq DESC LIMIT 1",
        (identity_hash, CONSOLIDATION_RUN)).first()
    if row is None:
        return RecordedDigest(0, 0, TierDigest())  # no pass yet: an empty tier
    payload = _run_fields(row[2])
    recorded = payload.get(RUN_DIGEST_KEY) if isinstance(payload, dict) else None
    return RecordedDigest(row[0], row[1],
                          None if recorded is None else TierDigest.of_payload(recorded))


def _run_fields(payload_json: str) -> Any:
    """The run's fields up to "reset" (the digest among them) when it has one, else the
    whole payload: a full pass's run lists every fact it touched, not needed here."""
    head, found, _ = payload_json.partition(',"reset":')
    if found:
        try:
            return json.loads(head + "}")
        except ValueError:
            pass
    return json.loads(payload_json)


def fact_rows(identity_hash: str, conn: Connection):
    """(id, kind, key, value_json, status, confidence, n, rule_version, last event id,
    last_updated_ns) of every stored fact, in key order."""
    mark = placeholder(conn)
    return conn.exec_driver_sql(
        "SELECT id, fact_kind, fact_key, fact_value_json, status, confidence, n_observations, "
        "rule_version, last_supporting_event_id, last_updated_ns FROM semantic_facts WHERE "
        f"identity_hash = {mark} ORDER BY fact_kind, fact_key", (identity_hash,))


def state_rows(identity_hash: str, conn: Connection):
    """(kind, key, state_json) of every stored state, in key order."""
    mark = placeholder(conn)
    return conn.exec_driver_sql(
        "SELECT fact_kind, fact_key, state_json FROM consolidation_state WHERE identity_hash "
        f"= {mark} ORDER BY fact_kind, fact_key", (identity_hash,))


def stored_tier_digest(identity_hash: str, conn: Connection) -> TierDigest:
    """The digest of the tier as it is stored now (every row read and hashed)."""
    digest = TierDigest()
    for row in fact_rows(identity_hash, conn):
        digest.fact_rows += 1
        digest.fact_sum += fact_row_hash(identity_hash, *row[1:])
    for kind, key, state_json in state_rows(identity_hash, conn):
        digest.state_rows += 1
        digest.state_sum += state_row_hash(identity_hash, kind, key, state_json)
    return digest

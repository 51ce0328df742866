"""Amended attempts (schema 7): an attempt counted once, with its final outcome.

A result may name its attempt (`attempt_id`) and a later result the attempt it amends
(`amends`: that attempt_id, or "event:" and the event id `record_event` returned for
it; docs/consolidation.md#amendments). The append that stores such a result decides,
in its transaction, what it changes in the counts, and writes that as signed rows
(`amendment_deltas`, `amendment_delta_values`) that a pass adds to the result rows of
its range (store/aggregates.py): -1 of the outcome the attempt counted until then, +1
of the new one, under the original's other fields, time bucket and parameters. So the
counts are those of the attempt with its final outcome whatever the order the results
arrive in and however the log is cut into passes:

- the final outcome is the matching amendment's with the latest stamp, ties broken by
  the SHA-256 of its stamp and canonical payload (not by arrival: the event hash
  depends on the chain position); an amendment that does not beat the current one
  changes nothing (`superseded`);
- an amendment must name the original's skill, target, environment and zone: one that
  does not is refused (`refused:mismatch`) and changes nothing;
- an amendment of an attempt that has not arrived is held (`held`): the original's
  append later counts it with the final outcome of the amendments held for it;
- an `event:` amendment names an event that exists already (its id was returned when it
  was stored): one naming no execution result of this chain is refused
  (`refused:unknown_event`), as is one naming an amendment (`refused:amends_an_amendment`).

The amendment's own result row is marked (AMENDMENT) so that no rule counts it as an
attempt of its own. What became of each amendment is its row's `disposition`, which a
pass counts (`amendment:<disposition>` in its skips). The attempts and amendments stay
when a compaction removes their events.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import Connection

from robot_memory.canonical import canonical_json, sha256_hex
from robot_memory.event_kinds import EXECUTION_RESULT
from robot_memory.execution_result import AMENDS_EVENT, InvalidRecord, stored_fields
from robot_memory.store.bulk import insert_rows, placeholder
from robot_memory.store.schema import (amendment_delta_values, amendment_deltas,
                                       result_amendments, result_attempts)

# The invalid_reason of an amendment's own combination: the rules count no attempt of it.
AMENDMENT = "amendment"
APPLIED, SUPERSEDED, HELD = "applied", "superseded", "held"
REFUSED_MISMATCH, REFUSED_UNKNOWN = "refused:mismatch", "refused:unknown_event"
REFUSED_CHAINED = "refused:amends_an_amendment"
AMENDMENT_DISPOSITIONS = (APPLIED, SUPERSEDED, HELD, REFUSED_MISMATCH, REFUSED_UNKNOWN,
                          REFUSED_CHAINED)
AMENDMENT_APPLIED, AMENDMENT_SUPERSEDED = APPLIED, SUPERSEDED  # as the package exports them

_ATTEMPT_COLUMNS = ("chain_id", "attempt_key", "original_event_id", "original_json",
                    "final_event_id", "final_stamp_ns", "final_hash", "final_success",
                    "final_reason")
_AMENDMENT_COLUMNS = ("chain_id", "seq", "event_id", "attempt_key", "stamp_ns", "rank_hash",
                      "success", "failure_reason", "skill_id", "target_class", "environment",
                      "zone", "disposition")
_DELTA_COLUMNS = ("chain_id", "seq", "combo_id", "event_id", "at_stamp_ns", "original_seq",
                  "stamp_ns", "n")
_DELTA_VALUE_COLUMNS = ("chain_id", "seq", "combo_id", "name", "value_repr", "event_id",
                        "at_stamp_ns", "original_seq", "stamp_ns", "n")


def names_an_attempt(payload: dict[str, Any]) -> bool:
    """Does this stored result name an attempt or amend one (is it for record_attempts)?
    Two lookups: a result without them (nearly all) costs nothing more."""
    return bool(payload.get("amends") or payload.get("attempt_id"))


def is_amendment(payload: dict[str, Any]) -> bool:
    """A result that amends an attempt: its own result row is marked AMENDMENT."""
    amends = payload.get("amends")
    return type(amends) is str and amends != ""


class Written(NamedTuple):
    """The event whose append writes an amendment's change of counts."""

    chain: int
    seq: int
    event_id: int
    stamp_ns: int


def rank_hash(stamp_ns: int, payload_json: str) -> str:
    """The tie-break between amendments of one stamp: a hash of the stamp and the
    canonical payload, the same whatever the order they were stored in."""
    return sha256_hex(f"{int(stamp_ns)}:{payload_json}")


def original_of(fields, stamp_ns: int, seq: int) -> dict[str, Any]:
    """What an attempt's counts are made of: its result's combination fields (as
    store/facets.py makes them), its parameters, its stamp and its chain position."""
    return {"combo": [fields.skill_id, fields.target_class, fields.environment, fields.zone,
                      int(fields.success), fields.failure_reason,
                      int(bool(fields.observations))],
            "parameters": sorted([name, repr(float(value))]
                                 for name, value in fields.parameters.items()),
            "stamp_ns": int(stamp_ns), "seq": int(seq)}


def record_attempts(conn: Connection, identity_hash: str, chain: int, combo_ids,
                    named: Sequence[tuple[int, int, int, dict[str, Any], str]]) -> None:
    """Record (event id, seq, stamp_ns, payload, canonical payload JSON) results that name
    an attempt, in chain order, in the appending transaction: register originals, resolve
    amendments and write what they change in the counts. combo_ids: the partition's
    ComboIds (store/facets.py)."""
    for event_id, seq, stamp_ns, payload, payload_json in named:
        try:
            fields = stored_fields(payload)
        except InvalidRecord:
            continue  # counted by the pass as an unreadable payload, like any
        at = Written(chain, seq, event_id, int(stamp_ns))
        amends = payload.get("amends")
        attempt_id = payload.get("attempt_id")
        if is_amendment(payload):
            _amend(conn, identity_hash, combo_ids, at, fields, amends,
                   rank_hash(stamp_ns, payload_json))
        elif type(attempt_id) is str and attempt_id:
            _register(conn, combo_ids, at, attempt_id, original_of(fields, stamp_ns, seq))


def _attempt(conn: Connection, chain: int, key: str):
    mark = placeholder(conn)
    return conn.exec_driver_sql(
        f"SELECT {', '.join(_ATTEMPT_COLUMNS[2:])} FROM result_attempts "
        f"WHERE chain_id = {mark} AND attempt_key = {mark}", (chain, key)).first()


def _register(conn: Connection, combo_ids, at: Written, key: str,
              original: dict[str, Any]) -> None:
    """An attempt's original result: recorded, then counted with the final outcome of the
    amendments held for it. A second result naming an attempt_id already taken is an
    attempt of its own, as every result without a name is (the first keeps the name)."""
    if _attempt(conn, at.chain, key) is not None:
        return
    success, reason = original["combo"][4], original["combo"][5]
    mark = placeholder(conn)
    held = conn.exec_driver_sql(
        f"SELECT seq, event_id, stamp_ns, rank_hash, success, failure_reason, skill_id, "
        f"target_class, environment, zone FROM result_amendments WHERE chain_id = {mark} "
        f"AND attempt_key = {mark} AND disposition = {mark} ORDER BY seq",
        (at.chain, key, HELD)).all()
    final = (0, 0, "", success, reason)  # (event id, stamp, hash, success, reason)
    decided, outcomes = [], []
    for seq, event_id, stamp, digest, amended_success, amended_reason, *named in held:
        if list(named) != original["combo"][:4]:
            decided.append((REFUSED_MISMATCH, seq))
            continue
        outcomes.append((amended_success, amended_reason))
        if final[0] == 0 or (stamp, digest) > (final[1], final[2]):
            if final[0]:
                decided.append((SUPERSEDED, final[5]))
            final = (event_id, stamp, digest, amended_success, amended_reason, seq)
        else:
            decided.append((SUPERSEDED, seq))
    if final[0]:
        decided.append((APPLIED, final[5]))
    _move(conn, combo_ids, at, original, (success, reason), (final[3], final[4]), outcomes)
    insert_rows(conn, result_attempts, _ATTEMPT_COLUMNS,
                [(at.chain, key, at.event_id, canonical_json(original), *final[:5])])
    _set_dispositions(conn, at.chain, decided)


def _set_dispositions(conn: Connection, chain: int, decided: list[tuple[str, int]]) -> None:
    if decided:
        mark = placeholder(conn)
        conn.exec_driver_sql(
            f"UPDATE result_amendments SET disposition = {mark} WHERE chain_id = {mark} "
            f"AND seq = {mark}", [(disposition, chain, seq) for disposition, seq in decided])


def _amend(conn: Connection, identity_hash: str, combo_ids, at: Written, fields,
           amends: str, digest: str) -> None:
    key, disposition = _attempt_named(conn, identity_hash, combo_ids, at.chain, amends)
    row = None if key is None else _attempt(conn, at.chain, key)
    if disposition is None:
        if row is None:
            disposition = HELD
        else:
            (_orig_id, original_json, final_id, final_stamp, final_hash, final_success,
             final_reason) = row
            original = json.loads(original_json)
            named = [fields.skill_id, fields.target_class, fields.environment, fields.zone]
            if named != original["combo"][:4]:
                disposition = REFUSED_MISMATCH
            elif final_id and (at.stamp_ns, digest) <= (final_stamp, final_hash):
                disposition = SUPERSEDED
                counted = (final_success, final_reason)
                _move(conn, combo_ids, at, original, counted, counted,
                      [(int(fields.success), fields.failure_reason)])
            else:
                disposition = APPLIED
                success = int(fields.success)
                _move(conn, combo_ids, at, original, (final_success, final_reason),
                      (success, fields.failure_reason))
                mark = placeholder(conn)
                conn.exec_driver_sql(
                    f"UPDATE result_attempts SET final_event_id = {mark}, final_stamp_ns = "
                    f"{mark}, final_hash = {mark}, final_success = {mark}, final_reason = "
                    f"{mark} WHERE chain_id = {mark} AND attempt_key = {mark}",
                    (at.event_id, at.stamp_ns, digest, success, fields.failure_reason,
                     at.chain, key))
                if final_id:
                    conn.exec_driver_sql(
                        f"UPDATE result_amendments SET disposition = {mark} WHERE "
                        f"chain_id = {mark} AND event_id = {mark}",
                        (SUPERSEDED, at.chain, final_id))
    insert_rows(conn, result_amendments, _AMENDMENT_COLUMNS, [(
        at.chain, at.seq, at.event_id, key or amends, at.stamp_ns, digest,
        int(fields.success), fields.failure_reason, fields.skill_id, fields.target_class,
        fields.environment, fields.zone, disposition)])


def _attempt_named(conn: Connection, identity_hash: str, combo_ids, chain: int, amends: str
                   ) -> tuple[str | None, str | None]:
    """(the attempt key an amends names, or None; a refusal, or None). An attempt_id is
    its own key; "event:<id>" names a stored result: its attempt_id's key when it has
    one, else the key "event:<id>" (its attempt row made on first use, from the event)."""
    if not amends.startswith(AMENDS_EVENT):
        return amends, None
    try:
        event_id = int(amends[len(AMENDS_EVENT):])
    except ValueError:
        return None, REFUSED_UNKNOWN
    mark = placeholder(conn)
    found = conn.exec_driver_sql(
        f"SELECT seq, stamp_ns, payload_json FROM events WHERE id = {mark} AND "
        f"identity_hash = {mark} AND kind = {mark}",
        (event_id, identity_hash, EXECUTION_RESULT)).first()
    if found is None:  # compacted away, or never this chain's
        known = conn.exec_driver_sql(
            f"SELECT attempt_key FROM result_attempts WHERE chain_id = {mark} AND "
            f"original_event_id = {mark}", (chain, event_id)).first()
        return (known[0], None) if known else (None, REFUSED_UNKNOWN)
    seq, stamp_ns, payload_json = found
    payload = json.loads(payload_json)
    if is_amendment(payload):
        return None, REFUSED_CHAINED
    attempt_id = payload.get("attempt_id")
    key = attempt_id if type(attempt_id) is str and attempt_id else amends
    if _attempt(conn, chain, key) is None:
        try:
            fields = stored_fields(payload)
        except InvalidRecord:
            return None, REFUSED_UNKNOWN
        _register(conn, combo_ids, Written(chain, seq, event_id, stamp_ns), key,
                  original_of(fields, stamp_ns, seq))
    return key, None


def _move(conn: Connection, combo_ids, at: Written, original: dict[str, Any],
          counted: tuple[int, str], new: tuple[int, str],
          touched: list[tuple[int, str]] = ()) -> None:
    """Write, as signed rows of event `at`, the change of an attempt's outcome from
    `counted` to `new` (success, failure_reason), and a row of 0 for each outcome of
    `touched` (amendments of the attempt that do not count): whatever the order they
    came in, every outcome an amendment of the attempt gave has its group, so that the
    groups (and the facts rendered of them) are the same in every order."""
    skill, target, environment, zone, _, _, has_observations = original["combo"]

    def combo(outcome: tuple[int, str]) -> tuple:
        return (skill, target, environment, zone, int(outcome[0]), outcome[1],
                has_observations, "")
    signed: dict[tuple, int] = {combo(outcome): 0 for outcome in touched}
    if combo(counted) != combo(new):
        signed[combo(counted)] = signed.get(combo(counted), 0) - 1
        signed[combo(new)] = signed.get(combo(new), 0) + 1
    if not signed:
        return
    ids = combo_ids.ids_of(conn, set(signed))
    stamp, seq = original["stamp_ns"], original["seq"]
    rows = [(ids[key], n) for key, n in sorted(signed.items())]
    insert_rows(conn, amendment_deltas, _DELTA_COLUMNS,
                [(at.chain, at.seq, combo_id, at.event_id, at.stamp_ns, seq, stamp, n)
                 for combo_id, n in rows])
    insert_rows(conn, amendment_delta_values, _DELTA_VALUE_COLUMNS,
                [(at.chain, at.seq, combo_id, name, value, at.event_id, at.stamp_ns, seq, stamp,
                  n) for combo_id, n in rows if n for name, value in original["parameters"]])


class AmendedAttempt(NamedTuple):
    """An attempt that counts an amendment's outcome, not its original's."""

    original_event_id: int
    amendment_event_id: int  # the amendment whose outcome counts
    success: bool
    failure_reason: str


class AmendedAttempts:
    """The amendments' part of a Partition (store/partition.py), which gives it `store`
    and its chain number (`chain_number`)."""

    def amended_attempts(self, conn: Connection | None = None) -> dict[int, AmendedAttempt]:
        """The attempts of this chain whose counted outcome is an amendment's, by the
        original's event id (`explain` counts each with that outcome)."""
        if conn is None:
            with self.store.read() as own:
                return self.amended_attempts(own)
        mark = placeholder(conn)
        rows = conn.exec_driver_sql(
            "SELECT original_event_id, final_event_id, final_success, final_reason FROM "
            f"result_attempts WHERE chain_id = {mark} AND original_event_id <> 0 AND "
            "final_event_id <> 0", (self.chain_number(conn),)).all()
        return {row[0]: AmendedAttempt(row[0], row[1], bool(row[2]), row[3]) for row in rows}

    def disposition_of(self, event_id: int, conn: Connection) -> str | None:
        """What became of the amendment stored as this event (AMENDMENT_DISPOSITIONS), or
        None when the event is no amendment of this chain."""
        mark = placeholder(conn)
        return conn.exec_driver_sql(
            f"SELECT disposition FROM result_amendments WHERE chain_id = {mark} AND "
            f"event_id = {mark}", (self.chain_number(conn), event_id)).scalar()


__all__ = ["AMENDMENT", "AMENDMENT_APPLIED", "AMENDMENT_DISPOSITIONS", "AMENDMENT_SUPERSEDED",
           "AmendedAttempt", "AmendedAttempts", "is_amendment", "names_an_attempt", "rank_hash",
           "record_attempts"]

"""Which stored fact or state differs: what `robot-memory verify` adds to the boot check's
verdict on the semantic tier (store/tier_check.py), whose digest says that a table
differs but not where.

Two depths:
- `locate_difference` (`verify`, run when a digest differs): the stored rows are held to
  the tier rebuilt from the live store (consolidation/tier_rebuild.py): the facts
  re-rendered from the stored states (the states' own digest matching), the states
  re-derived from the live log when it is whole. A row is named only when the rows that
  differ account exactly for the digest the run recorded (the stored sum, less their
  stored hashes, plus their rebuilt ones, is the recorded sum): rule parameters other
  than the consolidator's would make every fact differ, and then nothing is named. Once
  compactions moved history into segments, the states cannot be re-derived from the live
  store: that is said, with the command that can (`verify --full --archives DIR`).
- `rederive` (`verify --full`): the whole tier rebuilt from the log (the live chain, or
  the whole history from the archive segments in a scratch store, its event ids mapped
  back to the live ones) and compared with every stored row, byte for byte.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import select

from robot_memory.canonical import plain_json_loads
from robot_memory.event_kinds import SEGMENT_FORGOTTEN
from robot_memory.retention.compaction import CompactionError
from robot_memory.consolidation.checkpoint import read_checkpoint
from robot_memory.consolidation.rules import Rule, RulesConfig, rules_of_store
from robot_memory.consolidation.tier_rebuild import (checkpoint_and_plan, facts_from_states,
                                                     state_texts, states_from_log)
from robot_memory.store import (DIGEST_BITS, FACTS_TABLE, STATES_TABLE, Partition,
                                compactions, fact_row_hash, fact_rows, newest_run_digest,
                                state_row_hash, state_rows)
from robot_memory.store.schema import events

Key = tuple[str, str]
_MODULUS = 1 << DIGEST_BITS  # the digest's sums are modulo this


@dataclass(frozen=True)
class RowDifference:
    """A stored row that is not what the log makes of it."""

    table: str
    kind: str
    key: str
    row_id: int | None  # semantic_facts.id (a state's row is its key; a missing row has none)
    what: str  # edited, deleted (expected, not stored) or inserted (stored, not expected)

    def describe(self) -> str:
        noun = "fact" if self.table == FACTS_TABLE else "state"
        where = f"{self.table}.id {self.row_id}" if self.row_id is not None else \
            f"table {self.table}"
        return f"{noun} {self.kind}|{self.key} ({where}): {self.what}"


@dataclass
class TierAudit:
    identity_hash: str
    ok: bool
    lines: list[str] = field(default_factory=list)
    first: RowDifference | None = None  # the first row named

    def describe(self) -> str:
        return "; ".join(f"identity {self.identity_hash[:12]}: {line}" for line in self.lines)


# -- comparing rows -----------------------------------------------------------------------
def row_differences(table: str, stored: dict[Key, tuple[int | None, Any]],
                    expected: dict[Key, Any]) -> list[RowDifference]:
    """Every key whose stored row (row id, columns) differs from the expected columns, in
    key order."""
    found = []
    for key in sorted(set(stored) | set(expected)):
        row_id, columns = stored.get(key, (None, None))
        if key not in stored:
            found.append(RowDifference(table, *key, None, "deleted (the log makes this row)"))
        elif key not in expected:
            found.append(RowDifference(table, *key, row_id, "inserted (the log makes no "
                                                            "such row)"))
        elif columns != expected[key]:
            found.append(RowDifference(table, *key, row_id, "edited (differs from what the "
                                                            "log makes of it)"))
    return found


def _fact_hash(ident: str, key: Key, columns: tuple) -> int:
    return fact_row_hash(ident, *key, *columns)


def _state_hash(ident: str, key: Key, text: str) -> int:
    return state_row_hash(ident, *key, text)


def accounts_for(part: tuple[int, int], recorded: tuple[int, int], differences, stored,
                 expected, row_hash) -> bool:
    """Do these differences explain the digest: the stored part (rows, sum) with each
    differing row's stored hash taken out and its expected hash put in equals the
    recorded part?"""
    rows, total = part
    for d in differences:
        key = (d.kind, d.key)
        if key in stored:
            rows, total = rows - 1, total - row_hash(key, stored[key][1])
        if key in expected:
            rows, total = rows + 1, total + row_hash(key, expected[key])
    return (rows, total % _MODULUS) == recorded


def _stored_facts(ident: str, conn) -> dict[Key, tuple[int, tuple]]:
    return {(row[1], row[2]): (row[0], tuple(row[3:])) for row in fact_rows(ident, conn)}


def _stored_states(ident: str, conn) -> dict[Key, tuple[None, str]]:
    return {(kind, key): (None, text) for kind, key, text in state_rows(ident, conn)}


def _part_digest(stored: dict, row_hash) -> tuple[int, int]:
    return len(stored), sum(row_hash(key, row[1]) for key, row in stored.items()) % _MODULUS


# -- verify: name the row ---------------------------------------------------------------------
def locate_difference(partition: Partition, config: RulesConfig = RulesConfig(),
                      rules: Sequence[Rule] | None = None) -> TierAudit:
    """Name the first stored fact or state that makes the tier differ from its digest
    (with the rules of the store's version unless `rules` are given)."""
    ident = partition.identity_hash
    audit = TierAudit(ident, True)
    fact_hash, state_hash = partial(_fact_hash, ident), partial(_state_hash, ident)
    with partition.store.read() as conn:
        config, rules = rules_of_store(read_checkpoint(partition, conn).rule_version,
                                       config, rules)
        try:
            recorded = newest_run_digest(ident, conn).digest
        except ValueError:
            recorded = None
        if recorded is None:
            audit.lines.append("semantic tier: no digest to locate a difference against")
            return audit
        facts, states = _stored_facts(ident, conn), _stored_states(ident, conn)
        _, plan = checkpoint_and_plan(partition, conn)
        compacted = compactions(ident, conn)
        states_differ = _part_digest(states, state_hash) != recorded.states_part()
        facts_differ = _part_digest(facts, fact_hash) != recorded.facts_part()
        rebuilt_states = None
        if states_differ and not compacted:
            rebuilt_states = states_from_log(partition, config, conn, rules)
    texts = {key: row[1] for key, row in states.items()}
    if states_differ:
        audit.ok = False
        if compacted:
            audit.lines.append(
                f"table {STATES_TABLE} differs from its digest; history up to seq "
                f"{compacted[-1].until_seq} was compacted into archive segments, so the live "
                "store alone cannot re-derive the states: run `robot-memory verify --full "
                "--archives DIR` to name the row")
        else:
            expected = state_texts(rebuilt_states)
            _name(audit, STATES_TABLE, states, expected, recorded.states_part(), state_hash)
            if audit.first is not None and audit.first.table == STATES_TABLE:
                texts = expected
    if facts_differ:
        audit.ok = False
        parsed = {key: _parsed(text) for key, text in texts.items()}
        expected = facts_from_states(parsed, plan, config, rules)
        _name(audit, FACTS_TABLE, facts, expected, recorded.facts_part(), fact_hash)
    return audit


def _parsed(text: str) -> dict[str, Any]:
    """A stored state decoded (an undecodable one renders as an empty state)."""
    try:
        value = plain_json_loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _name(audit: TierAudit, table: str, stored: dict, expected: dict,
          recorded: tuple[int, int], row_hash) -> None:
    found = row_differences(table, stored, expected)
    if found and accounts_for(_part_digest(stored, row_hash), recorded, found, stored,
                              expected, row_hash):
        more = f" ({len(found) - 1} more row(s) differ)" if len(found) > 1 else ""
        audit.lines.append(f"first difference: {found[0].describe()}{more}")
        audit.first = audit.first or found[0]
        return
    audit.lines.append(
        f"table {table} differs from its digest, but the rows rebuilt from the live store "
        f"({len(found)} differing) do not account for it: if the consolidator runs with "
        "other rule parameters, give them with --param; else run `robot-memory verify "
        "--full`")


# -- verify --full: re-derive the whole tier ------------------------------------------------
def rederive(partition: Partition, config: RulesConfig = RulesConfig(),
             archive_dir: Path | None = None, rules: Sequence[Rule] | None = None
             ) -> TierAudit:
    """Rebuild the whole tier from the log and compare it with every stored row (with the
    rules of the store's version unless `rules` are given)."""
    from robot_memory.retention.archives import whole_history
    ident = partition.identity_hash
    audit = TierAudit(ident, True)
    with partition.store.read() as conn:
        config, rules = rules_of_store(read_checkpoint(partition, conn).rule_version,
                                       config, rules)
        compacted = compactions(ident, conn)
        facts, states = _stored_facts(ident, conn), _stored_states(ident, conn)
        forgotten = [e.payload.get("segment") for e in partition.events(
            kinds=[SEGMENT_FORGOTTEN], conn=conn)]
    if not compacted:
        with partition.store.read() as conn:
            rebuilt, plan = _rebuild(partition, config, conn, rules)
        return _compare_all(audit, facts, states, rebuilt, plan, config, rules)
    if archive_dir is None:
        audit.lines.append(f"semantic tier not re-derived: history up to seq "
                           f"{compacted[-1].until_seq} is in archive segments; give "
                           "--archives DIR to re-derive it")
        return audit
    # Forgotten on purpose and on the record, and not put back (a shipped segment
    # gathered from the fleet is): that history can no longer be read.
    forgotten = [name for name in forgotten if not (Path(archive_dir) / name).exists()]
    if forgotten:
        audit.lines.append(f"semantic tier not re-derived: {len(forgotten)} archive "
                           f"segment(s) were forgotten on purpose (newest {forgotten[-1]}), "
                           "so the whole history is no longer there to re-derive it from")
        return audit
    with tempfile.TemporaryDirectory(prefix="robot_memory_verify_") as scratch:
        try:
            history = whole_history(partition, archive_dir, f"sqlite:///{scratch}/h.db")
        except CompactionError as exc:
            audit.ok = False
            audit.lines.append(f"semantic tier not re-derived: {exc}")
            return audit
        try:
            with history.store.read() as conn:
                rebuilt, plan = _rebuild(history, config, conn, rules)
            _to_live_ids(rebuilt, plan, history, partition, archive_dir, compacted)
        finally:
            history.store.close()
    return _compare_all(audit, facts, states, rebuilt, plan, config, rules)


def _rebuild(history: Partition, config: RulesConfig, conn, rules):
    _, plan = checkpoint_and_plan(history, conn)
    return states_from_log(history, config, conn, rules), plan


def _compare_all(audit: TierAudit, facts, states, rebuilt, plan, config, rules) -> TierAudit:
    expected_states = state_texts(rebuilt)
    expected_facts = facts_from_states(rebuilt, plan, config, rules)
    found = row_differences(STATES_TABLE, states, expected_states) + \
        row_differences(FACTS_TABLE, facts, expected_facts)
    if not found:
        audit.lines.append(f"semantic tier re-derived from the log: {len(expected_facts)} "
                           f"facts and {len(expected_states)} states byte-equal to the stored "
                           "ones")
        return audit
    audit.ok, audit.first = False, found[0]
    audit.lines.append(f"semantic tier re-derived from the log differs in {len(found)} "
                       f"row(s); first difference: {found[0].describe()} (if the "
                       "consolidator runs with other rule parameters, give them with --param)")
    return audit


# -- event ids of a scratch history, mapped back to the live store's ---------------------------
def _to_live_ids(states: dict[Key, dict[str, Any]], plan, history: Partition,
                 live: Partition, archive_dir: Path, compacted) -> None:
    """The scratch store gave the re-appended events ids of its own; the states (their
    `last_event_id` entries) and the operators' facts name events, so their ids are mapped
    to the live store's, through the chain position both stores share."""
    from robot_memory.retention.segments import read_segment
    used: set[int] = set()
    for state in states.values():
        _event_ids(state, used.add)
    used.update(f.last_supporting_event_id for f in plan.operator_facts.values())
    seq_of = _seqs(history, used)
    wanted = set(seq_of.values())
    live_id = {}
    with live.store.read() as conn:
        for seq, event_id in conn.execute(select(events.c.seq, events.c.id).where(
                events.c.identity_hash == live.identity_hash,
                events.c.seq.in_(sorted(wanted)))).all():
            live_id[seq] = event_id
    for c in compacted:
        if not any(c.from_seq <= seq <= c.until_seq and seq not in live_id for seq in wanted):
            continue
        for row in read_segment(archive_dir / c.segment)[1]:
            if row.seq in wanted:
                live_id.setdefault(row.seq, row.id)
    mapping = {old: live_id.get(seq, old) for old, seq in seq_of.items()}
    for state in states.values():
        _event_ids(state, None, mapping)
    for key, fact in plan.operator_facts.items():  # made for this plan alone
        plan.operator_facts[key] = fact._replace(last_supporting_event_id=mapping.get(
            fact.last_supporting_event_id, fact.last_supporting_event_id))


def _seqs(history: Partition, ids: set[int]) -> dict[int, int]:
    found = {}
    ordered = sorted(ids)
    with history.store.read() as conn:
        for start in range(0, len(ordered), 500):
            found.update(conn.execute(select(events.c.id, events.c.seq).where(
                events.c.id.in_(ordered[start:start + 500]))).all())
    return found


def _event_ids(value: Any, collect=None, mapping: dict[int, int] | None = None) -> None:
    """Visit every `last_event_id` entry of a state (collect it, or map it in place)."""
    if isinstance(value, dict):
        for name, item in value.items():
            if name == "last_event_id" and type(item) is int:
                if collect is not None:
                    collect(item)
                if mapping is not None:
                    value[name] = mapping.get(item, item)
            else:
                _event_ids(item, collect, mapping)
    elif isinstance(value, list):
        for item in value:
            _event_ids(item, collect, mapping)


__all__ = ["RowDifference", "TierAudit", "locate_difference", "rederive", "row_differences"]

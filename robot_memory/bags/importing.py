"""`robot-memory import-bag`: execution results from rosbag2 bags into the episodic log.

Every `robot_memory/msg/ExecutionResult` message (and every message of a type a mapping
file maps onto it) is checked exactly as the live logger checks it; each rejected one
is reported with its topic, receive time and reason. The accepted results, any privacy
rejections and one `import` event (the bag's content hash, the selection and the counts)
are appended in ONE transaction: an import is all or nothing. A message an earlier
import of the same bag already took (same topic, inside its time window) is skipped,
so importing a bag twice adds nothing.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robot_memory.bags.mapping import Mapping
from robot_memory.bags.reading import (
    EXECUTION_RESULT_TYPE,
    BagContents,
    BagError,
    RawMessage,
    bag_identity,
    make_typestore,
    open_with_rosbags,
    register_bag_definitions,
    rosbags_messages,
    salvage,
)
from robot_memory.event_kinds import IMPORT
from robot_memory.intake.admission import Admission, Refused
from robot_memory.intake.receipt import DEFAULT_MAX_CLOCK_AHEAD_S
from robot_memory.intake.records import InvalidRecord
from robot_memory.wire.execution_result import serialized_result_fields
from robot_memory.store import NewEvent, Partition

MAX_LISTED_REJECTIONS = 100  # kept in the import event; all are counted and printed


@dataclass(frozen=True)
class Rejection:
    topic: str
    log_time_ns: int
    reason: str
    detail: str

    def describe(self) -> str:
        return (f"{self.topic} @ {self.log_time_ns / 1e9:.9f} s: rejected: {self.detail} "
                f"(reason {self.reason})")


@dataclass
class ImportReport:
    bag: dict[str, Any]
    topics: list[str] = field(default_factory=list)
    read: int = 0
    imported: int = 0
    already_imported: int = 0
    rejections: list[Rejection] = field(default_factory=list)
    damage: list[str] = field(default_factory=list)
    unread: dict[str, int] = field(default_factory=dict)  # topic -> messages listed, not read
    event_seq: int | None = None
    previous_import_seqs: list[int] = field(default_factory=list)
    clock_skew: int = 0  # results stamped ahead of their log time, stored at it

    @property
    def rejected_by_reason(self) -> dict[str, int]:
        return dict(sorted(Counter(r.reason for r in self.rejections).items()))

    @property
    def complete(self) -> bool:
        return not self.rejections and not self.damage and not self.unread

    def summary(self) -> str:
        if self.event_seq is None:
            return (f"bag {self.bag['name']} already imported (import event seq "
                    f"{', '.join(map(str, self.previous_import_seqs))}): "
                    f"{self.already_imported} messages skipped, nothing added")
        text = (f"imported {self.imported} execution results from {self.bag['name']} "
                f"({self.bag['storage']}, sha256 {self.bag['sha256'][:12]}), rejected "
                f"{len(self.rejections)}, already imported {self.already_imported}")
        if self.clock_skew:
            text += (f"; {self.clock_skew} stamped ahead of their log time, stored at it "
                     "(clock_skew)")
        if self.damage or self.unread:
            lost = sum(self.unread.values())
            text += (f"; DAMAGED BAG: {lost} listed messages could not be read"
                     if lost else "; DAMAGED BAG: parts could not be read")
        return text


def _covered_by(previous: list[dict[str, Any]]) -> Callable[[str, int], bool]:
    """Was (topic, receive time) taken by an earlier import of this bag?"""
    windows = [(set(p["selection"]["topics"]), p["selection"]["since_ns"],
                p["selection"]["until_ns"]) for p in previous]

    def covered(topic: str, log_time_ns: int) -> bool:
        return any(topic in topics and (since is None or log_time_ns >= since)
                   and (until is None or log_time_ns < until)
                   for topics, since, until in windows)
    return covered


def previous_imports(partition: Partition, sha256: str, conn=None):
    return [e for e in partition.events([IMPORT], conn=conn)
            if e.payload.get("bag", {}).get("sha256") == sha256]


def _selected_topics(contents: BagContents, wanted: list[str] | None,
                     mapping: Mapping | None) -> list[str]:
    importable = {EXECUTION_RESULT_TYPE} | set(mapping.types if mapping else ())
    chosen = sorted(name for name, t in contents.topics.items() if t.msgtype in importable)
    if wanted:
        missing = [t for t in wanted if t not in contents.topics]
        if missing:
            raise BagError(f"topic(s) {missing} not in the bag (it has "
                           f"{sorted(contents.topics)})")
        other = [t for t in wanted if t not in chosen]
        if other:
            raise BagError(f"topic(s) {other} carry "
                           f"{sorted({contents.topics[t].msgtype for t in other})}, neither "
                           f"{EXECUTION_RESULT_TYPE} nor a type of the mapping file")
        chosen = [t for t in chosen if t in wanted]
    return chosen


def _listed_counts(path: Path) -> dict[str, int]:
    """Message counts per topic from metadata.yaml (what should be there)."""
    import yaml
    try:
        info = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        return {t["topic_metadata"]["name"]: int(t["message_count"])
                for t in info["topics_with_message_count"]}
    except Exception:  # no metadata (a bare storage file) or a damaged one: counts unknown
        return {}


def read_bag(path: Path, topics: list[str] | None, mapping: Mapping | None
             ) -> tuple[BagContents, list[str], list[RawMessage]]:
    """(contents, chosen topics, their messages): the rosbags reader first; the salvage
    scanner, from the start, when rosbags refuses the bag or fails while reading it."""
    try:
        contents, reader = open_with_rosbags(path)
    except BagError:
        raise
    except Exception as exc:  # rosbags and sqlite errors vary: salvage says what is wrong
        return _salvaged(path, topics, mapping, exc)
    try:
        chosen = _selected_topics(contents, topics, mapping)
        return contents, chosen, list(rosbags_messages(reader, set(chosen)))
    except BagError:
        raise
    except Exception as exc:  # cut or damaged mid-read
        return _salvaged(path, topics, mapping, exc)
    finally:
        reader.close()


def _salvaged(path: Path, topics: list[str] | None, mapping: Mapping | None, exc: Exception):
    contents, messages = salvage(path, None)
    everything = list(messages)  # salvage learns the topics while it reads
    contents.damage.insert(0, f"the rosbags reader refused the bag ({type(exc).__name__}: "
                              f"{exc}); salvaged what could be read")
    chosen = _selected_topics(contents, topics, mapping)
    return contents, chosen, [m for m in everything if m.topic in chosen]


def import_bag(partition: Partition, path: Path, *, topics: list[str] | None = None,
               since_ns: int | None = None, until_ns: int | None = None,
               mapping: Mapping | None = None, progress: bool | None = None,
               on_rejection: Callable[[Rejection], None] | None = None,
               max_clock_ahead_s: float = DEFAULT_MAX_CLOCK_AHEAD_S) -> ImportReport:
    """Import one bag into `partition`; see the module docstring. `progress` None shows
    a progress bar only on a terminal."""
    from tqdm import tqdm
    path = Path(path)
    identity = bag_identity(path)
    report = ImportReport(identity)
    previous = previous_imports(partition, identity["sha256"])
    report.previous_import_seqs = [e.seq for e in previous]
    covered = _covered_by([e.payload for e in previous])

    store = make_typestore(mapping.msg_files if mapping else None)
    contents, chosen, messages = read_bag(path, topics, mapping)
    report.topics = chosen
    register_bag_definitions(store, {t: contents.topics[t] for t in chosen})
    for name in chosen:
        if contents.topics[name].msgtype not in store.fielddefs:
            raise BagError(f"topic {name}: no definition of {contents.topics[name].msgtype} "
                           "(the bag carries none; give it with msg_files in a mapping file)")

    # The one admission every path uses: the same checks, reasons and privacy_rejection
    # events as the logger and `robot-memory ingest`. The bag's log time is when the
    # recorder received a message: its receipt time.
    admission = Admission(max_clock_ahead_s=max_clock_ahead_s)
    read = _reader(store, mapping)
    results: list[NewEvent] = []
    refusals: list[NewEvent] = []
    read_per_topic: Counter[str] = Counter()
    listed = {t: contents.topics[t].listed_count for t in chosen}
    bar = tqdm(total=len(messages), unit="msg", desc=f"import {path.name}", leave=False,
               disable=None if progress is None else not progress)
    try:
        for raw in messages:
            bar.update(1)
            read_per_topic[raw.topic] += 1
            if since_ns is not None and raw.log_time_ns < since_ns:
                continue
            if until_ns is not None and raw.log_time_ns >= until_ns:
                continue
            report.read += 1
            if covered(raw.topic, raw.log_time_ns):
                report.already_imported += 1
                continue
            taken = admission.admit(read, raw, f"bag {path.name} {raw.topic}",
                                    raw.log_time_ns)
            if type(taken) is Refused:
                _reject(report, on_rejection, Rejection(raw.topic, raw.log_time_ns,
                                                        taken.reason, taken.detail))
                if taken.event is not None:
                    refusals.append(taken.event)
                continue
            results.append(taken)
    finally:
        bar.close()
    report.clock_skew = admission.clock_skew
    report.damage = contents.damage
    if since_ns is None and until_ns is None:
        report.unread = {t: n - read_per_topic[t] for t, n in
                         {**{k: v for k, v in _listed_counts(path).items() if k in chosen},
                          **{k: v for k, v in listed.items() if v is not None}}.items()
                         if n > read_per_topic[t]}
    if not results and not report.rejections and previous:
        return report  # a second import of the same bag: nothing at all is added
    report.imported = len(results)
    event = NewEvent(IMPORT, _import_payload(report, since_ns, until_ns, mapping),
                     time.time_ns())  # when the operator imported (wall clock)
    with partition.store.write() as conn:
        partition.append_in(conn, [])  # holds the chain's lock while we look again
        if len(previous_imports(partition, identity["sha256"], conn)) != len(previous):
            raise BagError(f"another import of {path.name} committed meanwhile; run again")
        stored = partition.append_in(conn, results + refusals + [event])
    report.event_seq = stored[-1].seq
    return report


def _reader(store, mapping: Mapping | None) -> Callable[[RawMessage], dict[str, Any]]:
    """A bag message's fields: an ExecutionResult's read as the logger reads one from its
    topic (rosbags decodes what that reader does not handle), a mapped type's decoded by
    rosbags and mapped."""
    def decoded_result(data: bytes):
        return store.deserialize_cdr(data, EXECUTION_RESULT_TYPE)

    def read(raw: RawMessage) -> dict[str, Any]:
        if raw.msgtype == EXECUTION_RESULT_TYPE:
            return serialized_result_fields(decoded_result, raw.data)
        try:
            msg = store.deserialize_cdr(raw.data, raw.msgtype)
        except Exception as exc:  # a corrupt payload: its own reason, the rest goes on
            raise InvalidRecord("message", "malformed",
                                f"{len(raw.data)} bytes that do not deserialize as "
                                f"{raw.msgtype} ({type(exc).__name__})") from None
        return mapping.types[raw.msgtype].fields_of(msg)
    return read


def _reject(report: ImportReport, on_rejection, rejection: Rejection) -> None:
    report.rejections.append(rejection)
    if on_rejection is not None:
        on_rejection(rejection)


def _import_payload(report: ImportReport, since_ns, until_ns, mapping) -> dict[str, Any]:
    return {
        "bag": report.bag,
        "selection": {"topics": report.topics, "since_ns": since_ns, "until_ns": until_ns,
                      "mapping_sha256": mapping.sha256 if mapping else None},
        "counts": {"read": report.read, "imported": report.imported,
                   "rejected": len(report.rejections),
                   "already_imported": report.already_imported,
                   "unread": sum(report.unread.values())},
        "rejected_by_reason": report.rejected_by_reason,
        "rejections": [{"topic": r.topic, "log_time_ns": r.log_time_ns, "reason": r.reason,
                        "detail": r.detail} for r in report.rejections[:MAX_LISTED_REJECTIONS]],
        "damage": report.damage,
        "unread_by_topic": dict(sorted(report.unread.items())),
    }

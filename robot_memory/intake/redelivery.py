"""Results that publishers deliver again, recognised so that each is stored once.

A transient-local publisher (EXECUTION_RESULTS_QOS) sends a reader that joins late, such
as a logger restarted after kill -9, the results it still holds: the last `depth` it
published. The previous logger stored some of them already. So each topic result records
the DDS sample it came in, beside its fields (`SampleId.record_in`): `publication_seq`,
the writer's sequence number; `source_timestamp_ns`, when the writer sent it; and
`publisher_gid`, the writer's GID (hex), where rclpy gives it (Kilted). Jazzy's rclpy
(7.1) gives none. At activation the logger reads those fields back from the newest
`window` events of the log (`stored_samples`). Then a sample is new:
- with a GID, when its sequence number is above the highest stored for its writer. A
  reliable writer's samples arrive in order, so the log holds a prefix of what the writer
  sends again. One number per writer is enough.
- without one, when its (source timestamp, sequence number) is not among those of the
  last `window` results. That is a set of at most `window` keys.
When the log is longer than the window, older events are not read. A sample sent before
the oldest one read (by source timestamp) is then taken to be stored already: a publisher
that has been idle that long was heard by an earlier logger.

Plain Python, no rclpy: the intake hands over the message info as rclpy gives it.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from typing import Any, NamedTuple

from robot_memory.event_kinds import EXECUTION_RESULT

WRITER, WRITER_SEQ, SOURCE_STAMP = "publisher_gid", "publication_seq", "source_timestamp_ns"


class SampleId(NamedTuple):
    """Which DDS sample a result came in."""

    writer: str  # the writer's GID in hex; "" where rclpy does not give it
    seq: int  # the writer's sequence number of this sample (1, 2, ...)
    sent_ns: int  # DDS source timestamp: the writer's clock when it published

    def record_in(self, payload: dict[str, Any]) -> None:
        if self.writer:
            payload[WRITER] = self.writer
        payload[WRITER_SEQ] = self.seq
        payload[SOURCE_STAMP] = self.sent_ns

    @classmethod
    def of_payload(cls, payload: dict[str, Any]) -> SampleId | None:
        seq, sent_ns = payload.get(WRITER_SEQ), payload.get(SOURCE_STAMP)
        if type(seq) is not int or type(sent_ns) is not int:
            return None
        writer = payload.get(WRITER, "")
        return cls(writer if type(writer) is str else "", seq, sent_ns)


def sample_of(info: dict[str, Any]) -> SampleId | None:
    """The SampleId in rclpy's message info (`take_message`'s second item), or None
    where the middleware gives no sequence number."""
    seq = info.get("publication_sequence_number")
    if seq is None:
        return None
    gid = info.get("publisher_gid")  # rclpy 9: {"implementation_identifier", "data"}
    writer = bytes(gid["data"]).hex() if gid and gid.get("data") else ""
    return SampleId(writer, int(seq), int(info.get("source_timestamp") or 0))


def stored_samples(partition, window: int) -> tuple[list[SampleId], bool]:
    """The SampleIds of the execution results among the newest `window` events of
    `partition`, oldest first, and whether the log holds older events than those."""
    found: list[SampleId] = []
    with partition.store.read() as conn:
        head, _ = partition.head(conn)
        after = max(0, head - window)
        for _id, _seq, _stamp, payload_json in partition.payload_rows(
                EXECUTION_RESULT, after, head, conn):
            if WRITER_SEQ not in payload_json:  # logged before samples were recorded
                continue
            sample = SampleId.of_payload(json.loads(payload_json))
            if sample is not None:
                found.append(sample)
    return found, after > 0


class Redelivery:
    """Decides whether a sample is new (`is_new`), knowing what the log holds
    (`remember`, oldest first) and what was taken since."""

    def __init__(self, window: int):
        self._window = window
        self._highest: dict[str, int] = {}  # writer GID: highest sequence number taken
        self._recent: set[int] = set()  # keys of GID-less samples ...
        self._recent_order: deque[int] = deque()  # ... oldest first, at most `window`
        self._floor_ns: int | None = None  # older samples: taken to be stored

    def remember(self, stored: Iterable[SampleId], log_is_longer: bool) -> None:
        """What the log holds, oldest first; `log_is_longer`: it holds older events
        that were not read."""
        oldest = None
        for sample in stored:
            self._note(sample)
            oldest = sample.sent_ns if oldest is None else min(oldest, sample.sent_ns)
        if log_is_longer:
            self._floor_ns = oldest

    def is_new(self, sample: SampleId) -> bool:
        """True when the log does not hold `sample` yet; it is then noted as taken."""
        if sample.writer:
            highest = self._highest.get(sample.writer)
            new = sample.seq > highest if highest is not None else self._after_floor(sample)
        else:
            new = _key(sample) not in self._recent and self._after_floor(sample)
        if new:
            self._note(sample)
        return new

    def _after_floor(self, sample: SampleId) -> bool:
        return self._floor_ns is None or sample.sent_ns >= self._floor_ns

    def _note(self, sample: SampleId) -> None:
        if sample.writer:
            if sample.seq > self._highest.get(sample.writer, 0):
                self._highest[sample.writer] = sample.seq
            return
        key = _key(sample)
        if key in self._recent:
            return
        self._recent.add(key)
        self._recent_order.append(key)
        if len(self._recent_order) > self._window:
            self._recent.discard(self._recent_order.popleft())


def _key(sample: SampleId) -> int:
    """One int for (source timestamp, sequence number): exact, and smaller than a tuple
    in a set that may hold `window` of them."""
    return (sample.seq << 64) | (sample.sent_ns & 0xFFFF_FFFF_FFFF_FFFF)

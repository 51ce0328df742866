"""What `ground` converts per answer, made once: the SemanticFact message of each fact
it serves, the whole answer to each distinct question, and its consultation ids.

A fact's row is never changed in place (a pass's delta brings a new row), so the message
made from a row stays right for as long as that row is the one served.

Why: building a fact's message parses its value JSON and fills a dozen typed fields, and
done for every answer it was most of the handler's time, for the same few facts a planner
asks about again and again (docs/performance.md, "Why the code is shaped this way").
"""

from __future__ import annotations

import itertools
import secrets
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from robot_memory.msg import SemanticFact
from robot_memory.ros.conversions import fact_to_msg
from robot_memory.store import FactRow

# Messages kept: the facts recently served (a planner's working set), not all 10^4.
CAPACITY = 4096


class FactMessages:
    """SemanticFact of a served FactRow, made on its first answer and reused after, for
    the CAPACITY rows served most recently. One thread only (the `ground` handler's)."""

    def __init__(self, capacity: int = CAPACITY):
        self.capacity = capacity
        self.failed: dict[tuple[str, str], str] = {}
        # id(row) -> (row, message): the row is kept, so its id is not reused meanwhile
        self._made: OrderedDict[int, tuple[FactRow, SemanticFact]] = OrderedDict()

    def of(self, fact: FactRow) -> SemanticFact | None:
        """None for a fact whose value no message can be made of (kept in `failed`: kind,
        key -> why): the answer leaves it out, and only it."""
        key = id(fact)
        made = self._made.get(key)
        if made is not None and made[0] is fact:
            self._made.move_to_end(key)
            return made[1]
        try:
            msg = fact_to_msg(fact)
        except Exception as exc:
            self.failed[(fact.kind, fact.key)] = f"{type(exc).__name__}: {exc}"
            return None
        if self.failed:  # a new version of a fact that failed: no longer left out
            self.failed.pop((fact.kind, fact.key), None)
        self._made[key] = (fact, msg)
        if len(self._made) > self.capacity:
            self._made.popitem(last=False)
        return msg

    def __len__(self) -> int:
        return len(self._made)


class AnswerMemo:
    """The answer, and its response message, to each distinct request, for as long as the
    index and the priors it came from are the ones served. Bounded: full, it starts
    over. One thread only (the `ground` handler's).

    Why: a planner asks the same few questions many times a second, and an immutable
    index answers a question the same way until a pass's delta swaps in a new one, while
    the lookup and the message were a large share of what the server added to a round
    trip (docs/performance.md, "Why the code is shaped this way")."""

    def __init__(self, capacity: int = 1024):
        self.capacity = capacity
        self._source: tuple[object, object] | None = None
        self._answers: dict[Hashable, tuple[Any, Any]] = {}

    def get(self, request: Hashable, index: object, priors: object) -> tuple[Any, Any] | None:
        """(answer, response) made for this request from this index and these priors."""
        source = self._source
        if source is None or source[0] is not index or source[1] is not priors:
            self._source = (index, priors)
            self._answers = {}
            return None
        return self._answers.get(request)

    def put(self, request: Hashable, answer: Any, response: Any) -> None:
        if len(self._answers) >= self.capacity:
            self._answers = {}
        self._answers[request] = (answer, response)

    def __len__(self) -> int:
        return len(self._answers)


class ConsultationIds:
    """32 hex digits, as a uuid4's, unique across the robot's processes: 64 random bits
    drawn once per process, then a counter. Not a uuid4 per answer: its random bits
    cost a system call each, a noticeable share of the handler's time
    (docs/performance.md, "Why the code is shaped this way")."""

    def __init__(self):
        self._prefix = secrets.token_hex(8)
        self._counter = itertools.count()

    def next(self) -> str:
        return f"{self._prefix}{next(self._counter):016x}"

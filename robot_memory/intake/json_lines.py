"""A line of a JSON-lines file (`robot-memory ingest`) as a result's fields.

Each line is one JSON object with a result's fields and its `stamp` in seconds (a number,
or a string of decimal digits for more precision than a float holds). `line_fields` is
the reader `admission.Admission.admit` is given for a line: whatever is wrong with the
line itself (not UTF-8, not JSON, nested too deeply, not an object, no stamp or one that
no int64 nanosecond time holds) is an InvalidRecord with its reason, as a bad field is.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from robot_memory.intake.records import MAX_STAMP_NS, InvalidRecord

# No valid result comes near this as a JSON line; a longer line is skipped unread.
MAX_LINE_BYTES = 1 << 20
# A \u escape of a UTF-16 surrogate: JSON can spell one alone, which no UTF-8 text holds.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def lines(handle):
    """A binary file's lines, None for each one longer than MAX_LINE_BYTES, whose bytes
    are skipped in chunks, never held whole."""
    while True:
        line = handle.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while (rest := handle.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
            yield None
            continue
        yield line


def line_fields(line: bytes | None) -> dict[str, Any]:
    """The fields of one line from `lines` (its stamp as stamp_ns), or InvalidRecord."""
    if line is None:
        raise InvalidRecord("line", "oversized",
                            f"more than {MAX_LINE_BYTES} bytes, not read")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRecord("line", "malformed",
                            f"not UTF-8 (byte {exc.start}: {exc.reason})") from None
    try:
        data = json.loads(text)
    except RecursionError:
        raise InvalidRecord("line", "malformed", "nested too deeply to read") from None
    except ValueError as exc:
        raise InvalidRecord("line", "malformed", f"not JSON ({exc})") from None
    if type(data) is not dict:
        raise InvalidRecord("line", "wrong_type",
                            f"a JSON {type(data).__name__}, not an object")
    if _SURROGATE_ESCAPE.search(line):
        _refuse_surrogates(data)
    if "stamp" not in data:
        raise InvalidRecord("stamp", "missing_field", "missing (seconds)")
    data["stamp_ns"] = stamp_seconds_to_ns(data.pop("stamp"))
    return data


def _refuse_surrogates(data: dict[str, Any]) -> None:
    """Refuse a field whose text (or a key's) holds a lone surrogate: valid JSON, but no
    store can encode it, and one such result must not fail the whole file's write."""
    for name, value in data.items():
        try:
            json.dumps([name, value], ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidRecord(name, "invalid_value", "text that is not valid Unicode "
                                "(a lone surrogate)") from None


def stamp_seconds_to_ns(value: Any) -> int:
    """Seconds (a JSON number, or a string of one) as int64 nanoseconds, or InvalidRecord
    (field `stamp`): wrong_type, non_finite_value, or invalid_value for a negative one or
    one past what 64-bit nanoseconds hold (year 2262), however large its exponent."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InvalidRecord("stamp", "wrong_type", "must be a number of seconds")
    try:
        seconds = Decimal(str(value))
    except (InvalidOperation, ValueError):  # ValueError: more digits than str() gives
        raise InvalidRecord("stamp", "wrong_type", f"{value!r} is not a number") from None
    if not seconds.is_finite():
        raise InvalidRecord("stamp", "non_finite_value", f"{value!r} must be finite and >= 0")
    if seconds < 0:
        raise InvalidRecord("stamp", "invalid_value", f"{value!r} must be finite and >= 0")
    # adjusted(): the exponent of the first digit, read without arithmetic (which would
    # overflow Decimal's context for 1e999999999999, or build a huge integer).
    if seconds and seconds.adjusted() > len(str(MAX_STAMP_NS)) - 9:
        raise _past_int64(value)
    stamp_ns = int(seconds * 1_000_000_000)
    if stamp_ns > MAX_STAMP_NS:
        raise _past_int64(value)
    return stamp_ns


def _past_int64(value: Any) -> InvalidRecord:
    return InvalidRecord("stamp", "invalid_value", f"{value!r} is past what a 64-bit "
                         "nanosecond time can hold (year 2262)")

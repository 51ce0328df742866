"""Canonical JSON: the one byte representation that hashes and snapshots are taken over.

The identity hash, the hash chain and the semantic tier's digest are taken over these
bytes, so they never change: test/core/test_canonical.py holds them to fixed expected
bytes (floats, integers past 64 bits, unicode, control characters, nesting, key order).
Only public APIs: the standard library's `json.JSONEncoder`, and orjson (pinned) where
it writes the same text.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

try:  # optional: plain_canonical_json is exact without it, only slower
    import orjson
except ImportError:  # pragma: no cover - an install without the pinned requirements
    orjson = None


# One encoder, made once: json.dumps with these options would build a new one per call.
# Without a table of the containers being encoded (check_circular=False): a value that
# contains itself raises RecursionError instead, turned into a ValueError below.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                            allow_nan=False, check_circular=False)


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, UTF-8 text, NaN refused.

    Floats are written with Python's shortest round-trip repr, so the same value always
    gives the same bytes. Raises ValueError for NaN or infinity (or a value that contains
    itself) and TypeError for a value JSON cannot hold (a set, bytes, an object).
    """
    try:
        return _ENCODER.encode(value)
    except RecursionError:
        raise ValueError("value nests too deeply or contains itself") from None


# orjson's text is the standard encoder's (sorted keys, shortest round-trip floats, UTF-8)
# except: floats of magnitude 1e-9 .. 1e-4 ("0.00001" and "1e-6" where repr writes
# "1e-05" and "1e-06"), and NaN or infinity, which it writes as null instead of refusing.
# Text where either could be is encoded again by the standard encoder, as is anything
# orjson refuses (an int past 64 bits, a lone surrogate, a subclass, a dataclass...).
_SHORT_NEGATIVE_EXPONENT = re.compile(r"e-[0-9](?![0-9])")
_ORJSON_OPTIONS = 0 if orjson is None else (
    orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS)


def plain_canonical_json(value: Any) -> str:
    """canonical_json of plain data: dicts with str keys, lists, str, int, float, bool and
    None (what the consolidation rules render and keep as state). Not for anything else
    (orjson would write an Enum or a UUID, which canonical_json refuses).

    The same text, encoded by orjson when it is installed, which is faster
    (docs/performance.md): a pass encodes two documents per fact it touches."""
    if orjson is None:
        return canonical_json(value)
    try:
        text = orjson.dumps(value, option=_ORJSON_OPTIONS).decode("utf-8")
    except TypeError:  # orjson.JSONEncodeError
        return canonical_json(value)
    # Substring tests first: a regular expression over the whole text costs as much as
    # encoding it. On the decoded text: str's substring search is faster than bytes'
    # (and the text is UTF-8: the same ASCII substrings are found).
    if "null" in text or "0.0000" in text or _has_short_negative_exponent(text):
        return canonical_json(value)
    return text


def _has_short_negative_exponent(text: str) -> bool:
    """_SHORT_NEGATIVE_EXPONENT.search(text), found from each "-": one character is
    found by memchr, far faster than searching for "e-" (an "e" is in most keys), and a
    text has a few, if any (a negative number)."""
    at = text.find("-")
    while at != -1:
        if at and text[at - 1] == "e" and _SHORT_NEGATIVE_EXPONENT.match(text, at - 1):
            return True
        at = text.find("-", at + 1)
    return False


def plain_json_loads(text: str) -> Any:
    """json.loads of text that plain_canonical_json wrote (its integers fit in 64 bits:
    orjson reads a longer one as a float), with orjson when it is installed, which is
    faster: a pass decodes the stored state of every group it touches."""
    if orjson is None:
        return json.loads(text)
    return orjson.loads(text)


def sha256_hex(text: str) -> str:
    """SHA-256 of `text` encoded as UTF-8, as 64 lowercase hex digits."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()

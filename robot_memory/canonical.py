"""Canonical JSON: the one byte representation that hashes and snapshots are taken over."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, UTF-8 text, NaN refused.

    Floats are written with Python's shortest round-trip repr, so the same value always
    gives the same bytes. Raises ValueError for NaN or infinity and TypeError for a value
    JSON cannot hold (a set, bytes, an object).
    """
    return _encode(value)


# What json.dumps with these options does on each call, made once (a new encoder per
# call cost about a third of encoding a result).
_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                           allow_nan=False).encode


def sha256_hex(text: str) -> str:
    """SHA-256 of `text` encoded as UTF-8, as 64 lowercase hex digits."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()

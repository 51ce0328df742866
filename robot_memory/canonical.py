"""Canonical JSON: the one byte representation that hashes and snapshots are taken over."""

from __future__ import annotations

import hashlib
import json
from json.encoder import c_make_encoder, encode_basestring
from typing import Any


# One encoder, made once: json.dumps with these options would build a new one per call
# (a consolidation pass encodes two documents per fact).
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                            allow_nan=False)
# And its C encoding function, made once as well: JSONEncoder.encode makes a new one
# per call, a fifth of encoding a fact. Without a table of the containers being encoded
# (None): a value that contains itself raises RecursionError instead, turned into a
# ValueError below.
_C_ENCODE = c_make_encoder(None, _ENCODER.default, encode_basestring, None, ":", ",",
                           True, False, False) if c_make_encoder is not None else None


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, UTF-8 text, NaN refused.

    Floats are written with Python's shortest round-trip repr, so the same value always
    gives the same bytes. Raises ValueError for NaN or infinity (or a value that contains
    itself) and TypeError for a value JSON cannot hold (a set, bytes, an object).
    """
    if _C_ENCODE is None or isinstance(value, str):
        return _ENCODER.encode(value)
    try:
        return "".join(_C_ENCODE(value, 0))
    except RecursionError:
        raise ValueError("value nests too deeply or contains itself") from None


def sha256_hex(text: str) -> str:
    """SHA-256 of `text` encoded as UTF-8, as 64 lowercase hex digits."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()

"""The privacy boundary: a deterministic detector for secrets and personal data in
execution results. Whatever it flags is refused at the door; the refusal names the
field and the category, never the value."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Category -> pattern. Ordered: the first match names the category.
PATTERNS: dict[str, re.Pattern[str]] = {
    "private_key": re.compile(r"-----BEGIN (?:[A-Z]+ )*PRIVATE KEY-----"),
    "jwt": re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),
    "api_key": re.compile(
        r"\b(?:AKIA[0-9A-Z]{16}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}"
        r"|xox[abprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35})\b"
        r"|(?i:\b(?:api[_-]?key|access[_-]?token|secret[_-]?key|auth[_-]?token|bearer)"
        r"\b\s*[:=]?\s*[A-Za-z0-9_./+-]{12,})"),
    "password": re.compile(r"(?i)\b(?:password|passwd|passphrase|pwd)\b\s*[:=]\s*\S+"),
    "email": re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b"),
    "phone_number": re.compile(
        r"(?<![\w.])(?:\+\d{1,3}[\s.-]?)?(?:\(\d{2,4}\)[\s.-]?|\d{2,4}[\s.-])\d{3,4}[\s.-]\d{3,4}"
        r"(?![\w.])|(?<![\w.])\+\d{9,15}(?![\w.])"),
}


# Any category at all, in one search: most texts are clean, and one pass over them is
# much cheaper than one per category. Only a text it matches is tried category by category.
_ANY = re.compile("|".join(
    f"(?:{p.pattern})" if not p.pattern.startswith("(?i)") else f"(?i:{p.pattern[4:]})"
    for p in PATTERNS.values()))


@dataclass(frozen=True)
class Finding:
    field: str
    category: str


def _texts(data: dict) -> list[tuple[str, str]]:
    """Every string an execution result carries, with where it is (keys included)."""
    found = []
    for name, value in data.items():
        if isinstance(value, str):
            found.append((name, value))
        elif isinstance(value, dict):
            found += [(f"{name} key", str(key)) for key in value]
    return found


def find_sensitive(data: dict) -> Finding | None:
    """The first field that looks like a secret or personal data, or None."""
    for field, text in _texts(data):
        if not text or _ANY.search(text) is None:
            continue
        for category, pattern in PATTERNS.items():
            if pattern.search(text):
                return Finding(field, category)
    return None

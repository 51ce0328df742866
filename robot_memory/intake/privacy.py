"""The privacy boundary: a deterministic detector for secrets and personal data in every
text that enters the log: execution results (and `record_event`'s request id), human
overrides (consolidation/override_privacy.py) and the requester and intent of a
grounding request (grounding_request.py). Whatever it flags is refused at the door; the
refusal names the field and the category, never the value."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# Boundaries are "not a letter or digit" rather than regex word boundaries (\b): a
# secret glued to an underscore (`token_AKIA...`, `cam_gain_eyJ...`) is still found,
# while a longer run of letters and digits (an id, a hash) is not cut into a match.
_START, _END = r"(?<![A-Za-z0-9])", r"(?![A-Za-z0-9])"


class _PhoneNumber:
    """Phone numbers: a pattern finds candidates, the digit count decides (E.164 has 8
    to 15 digits with the country code), so `+1 2 3` or a coordinate is not a number."""

    # International: +country code, then groups of 1-4 digits with any common separator.
    # National: (415) 555-0123; 415-555-0123 or 415.555.0123 (one separator throughout);
    # 020 7946 0958 (spaces need the trunk 0: a list of integers is not a number).
    _CANDIDATE = re.compile(
        r"(?<![A-Za-z0-9.+])(?:\+\d{1,3}(?:[\s.-]?\(?\d{1,4}\)?){2,7}"
        r"|\(\d{2,4}\)[\s.-]?\d{3,4}[\s.-]\d{3,4}|\d{2,4}([.-])\d{3,4}\1\d{3,4})"
        r"(?![A-Za-z0-9]|\.\d)"
        r"|(?<![A-Za-z0-9.+])0\d{1,4} \d{3,4} \d{3,4}(?![A-Za-z0-9]|\.\d)")

    # Groups of a UUID (0211-4503-9321) look like a national number; they are ids.
    _UUID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")

    def search(self, text: str) -> str | None:
        uuids = [m.span() for m in self._UUID.finditer(text)]
        for match in self._CANDIDATE.finditer(text):
            if any(start <= match.start() < end for start, end in uuids):
                continue
            number = self._longest_number(match.group())
            if number:
                return number
        return None

    @staticmethod
    def _longest_number(candidate: str) -> str:
        """The longest run of whole digit groups from the start with 8 to 15 digits (a
        number followed by more digits, `+14155550123 1234`, is still found)."""
        digits, best = 0, ""
        for index, char in enumerate(candidate):
            if char.isdigit():
                digits += 1
                at_group_end = index + 1 == len(candidate) or not candidate[index + 1].isdigit()
                if at_group_end and 8 <= digits <= 15:
                    best = candidate[:index + 1]
        return best


# Category -> pattern. Ordered: the first match names the category.
PATTERNS: dict[str, re.Pattern[str] | _PhoneNumber] = {
    "private_key": re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    "jwt": re.compile(_START + r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
    "api_key": re.compile(
        _START + r"(?:(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[0-9A-Z]{16}"
        r"|sk-[A-Za-z0-9_-]{20,}|(?:sk|rk|pk)_live_[A-Za-z0-9]{16,}"
        r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}"
        r"|xox[abprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35})" + _END +
        r"|(?i:\b(?:api[_-]?key|access[_-]?token|secret[_-]?key|auth[_-]?token|bearer)"
        r"\b\s*[:=]?\s*[A-Za-z0-9_./+-]{12,})"),
    "password": re.compile(r"(?i)\b(?:password|passwd|passphrase|pwd)\b\s*[:=]\s*\S+"),
    # Matches start only where a local part starts: linear, not quadratic, on long runs.
    "email": re.compile(r"(?<![A-Za-z0-9!#$%&'*+/=?^_`{|}~.-])[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+"
                        r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+"
                        r"[A-Za-z][A-Za-z0-9-]*[A-Za-z0-9](?![A-Za-z0-9])"),
    "phone_number": _PhoneNumber(),
}


# Any category at all, in one search: most texts are clean, and one pass over them is
# much cheaper than one per category. Only a text it matches is tried category by category.
# Phone numbers are decided by counting digits, so any text with 8 or more digits is tried.
_ANY = re.compile("|".join(
    f"(?:{p.pattern})" if not p.pattern.startswith("(?i)") else f"(?i:{p.pattern[4:]})"
    for p in PATTERNS.values() if isinstance(p, re.Pattern)))
_DIGIT = re.compile(r"\d")


# Short texts found clean: names and ids repeat in every result, and a set lookup is
# cheaper than a cached call. Bounded: emptied when full (a flood of distinct texts
# costs only their searches), at most 2,048 texts of 128 characters (< 1 MB).
_CLEAN: set[str] = set()
_CACHED_LENGTH = 128
_CACHED_AT_MOST = 2048


def _may_be_sensitive(text: str) -> bool:
    """For a text not in _CLEAN (find_sensitive looks there first)."""
    if _ANY.search(text) is not None or len(_DIGIT.findall(text)) >= 8:
        return True
    if len(text) <= _CACHED_LENGTH:
        if len(_CLEAN) >= _CACHED_AT_MOST:
            _CLEAN.clear()
        _CLEAN.add(text)
    return False


@dataclass(frozen=True)
class Finding:
    """Where a result looks sensitive: the field (never the value) and the category."""

    field: str
    category: str


def find_sensitive(data: dict) -> Finding | None:
    """The first field that looks like a secret or personal data, or None. Reads only
    strings (keys included) and never raises for well-formed input; callers turn a
    finding into InvalidRecord (`privacy_<category>`)."""
    # Fields in order, keys of a mapping after its name; no list of texts is built: this
    # runs on every result.
    clean = _CLEAN
    for name, value in data.items():
        if isinstance(value, str):
            if value and value not in clean and _may_be_sensitive(value):
                category = _category(value)
                if category is not None:
                    return Finding(name, category)
        elif isinstance(value, dict):
            for key in value:
                text = key if type(key) is str else str(key)
                if text and text not in clean and _may_be_sensitive(text):
                    category = _category(text)
                    if category is not None:
                        return Finding(f"{name} key", category)
    return None


def _category(text: str) -> str | None:
    for category, pattern in PATTERNS.items():
        if pattern.search(text):
            return category
    return None


def find_sensitive_in(name: str, value: Any) -> Finding | None:
    """The first text in `value` that looks sensitive, as a Finding named `name` (a
    string; or JSON data: its strings and a mapping's keys at any depth, the keys named
    `<name> key`). The field is only ever `name`: a key may be the secret itself."""
    if isinstance(value, str):
        return find_sensitive({name: value})
    if isinstance(value, dict):
        for key, item in value.items():
            found = (find_sensitive({f"{name} key": str(key)})
                     or find_sensitive_in(name, item))
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for item in value:
            found = find_sensitive_in(name, item)
            if found is not None:
                return found
    return None


def refusal_reason(finding: Finding) -> str:
    """The words of a privacy refusal: the field and the category, never the value."""
    return (f"{finding.field}: looks like {finding.category.replace('_', ' ')}; refused at "
            f"the privacy boundary (privacy_{finding.category})")

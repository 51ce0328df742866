"""How long each text field of a service request may be.

The services answer anyone on the domain. A request over these limits is refused with a
reason naming the field, before anything reads its contents, logs it or writes it into
the store (the consultation audit and the override events keep what requests say); the
audit keeps an over-long field as its length. ROS-free: fields are read by name.
"""

from __future__ import annotations

from typing import Any

from robot_memory.execution_result import MAX_NOTES, MAX_TEXT

MAX_KIND = 64  # a fact kind or an override action
MAX_FACT_KEY = 4096  # a fact key joins several names
MAX_VALUE_JSON = 65536  # an operator fact's value
MAX_PATH = 4096
MAX_FACT_KINDS = 32
MAX_TARGET_PROPERTIES = 32  # measured properties a grounding request may give
MAX_CREDENTIAL = 512  # an operator credential (operator_credentials: about 160)

# A number is a text's limit in characters; a (items, characters) pair a list's (of texts,
# or of KeyValue pairs: then the characters of each key).
GROUND = {"skill_id": MAX_TEXT, "target_class": MAX_TEXT, "environment": MAX_TEXT,
          "zone": MAX_TEXT, "requester": MAX_TEXT, "intent_id": MAX_TEXT,
          "fact_kinds": (MAX_FACT_KINDS, MAX_KIND),
          "target_properties": (MAX_TARGET_PROPERTIES, MAX_KIND)}
EXPLAIN = {"kind": MAX_KIND, "key": MAX_FACT_KEY, "intent_id": MAX_TEXT}
OVERRIDE = {"action": MAX_KIND, "operator_name": MAX_TEXT, "reason": MAX_NOTES,
            "kind": MAX_KIND, "key": MAX_FACT_KEY, "value_json": MAX_VALUE_JSON,
            "archive_path": MAX_PATH, "credential": MAX_CREDENTIAL}


def over_limit(request: Any, limits: dict[str, Any]) -> tuple[str, str] | None:
    """(field, what is too long) for the first field of `request` over its limit, or
    None when every field is within its limit."""
    for name, limit in limits.items():
        value = getattr(request, name)
        if isinstance(limit, tuple):
            items, each = limit
            if len(value) > items:
                return name, f"{len(value)} entries, more than {items}"
            for i, item in enumerate(value):
                text = item if isinstance(item, str) else item.key
                if len(text) > each:
                    return f"{name}[{i}]", f"{len(text)} characters, more than {each}"
        elif len(value) > limit:
            return name, f"{len(value)} characters, more than {limit}"
    return None


def clipped(text: str, limit: int) -> str:
    """`text`, or only its length when it is over `limit` (what the audit keeps)."""
    return text if len(text) <= limit else f"({len(text)} characters, over the limit)"

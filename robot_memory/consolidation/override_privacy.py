"""The privacy boundary for human overrides: every text an override would put in the
log (operator, reason, fact kind and key, the value's strings and keys, the archive
path) passes the detector that screens execution results (intake/privacy.py) before
anything is written. A finding refuses the override, naming the field and the category
(never the value), and logs a `privacy_rejection` event (source `override`) in its place,
as a refused result does."""

from __future__ import annotations

import json
from typing import Any

from robot_memory.errors import InputError
from robot_memory.event_kinds import PRIVACY_REJECTION
from robot_memory.intake.privacy import Finding, find_sensitive_in, refusal_reason
from robot_memory.store import Partition

SOURCE = "override"


class OverridePrivacyRefused(InputError):
    """An override refused at the privacy boundary; `finding` names field and category."""

    def __init__(self, finding: Finding):
        super().__init__(refusal_reason(finding))
        self.finding = finding


def screen_override(partition: Partition, stamp_ns: int, *, operator: str, reason: str,
                    kind: str = "", key: str = "", value: Any = None,
                    archive_path: str = "") -> None:
    """Refuse (OverridePrivacyRefused, after logging its privacy_rejection event) an
    override whose texts look like a secret or personal data. `value` is the value as
    given: JSON text (read here; text that is no JSON is screened as it is, and refused
    as no JSON by the recording) or the value itself."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            pass  # screened as text
    for name, given in (("operator", operator), ("reason", reason), ("kind", kind),
                        ("key", key), ("value", value), ("archive_path", archive_path)):
        finding = find_sensitive_in(name, given)
        if finding is not None:
            partition.append(PRIVACY_REJECTION, {"source": SOURCE, "field": finding.field,
                                                 "category": finding.category}, stamp_ns)
            raise OverridePrivacyRefused(finding)

"""Human overrides: operators correct the memory without rewriting history (as the
"Long-Term Memory & Knowledge Consolidation Protocol Spec v0.1" asks).

Every override is an `override` event in the episodic log (who, why, what); the
consolidation pass and replay read them from the log in order, so replay reproduces
their effect byte for byte. Nothing here edits the log or a fact row directly.

- operator_fact: a fact given by an operator, marked as such (rule_version
  `operator/1`, value `source: operator`), served like an active fact. Later robot
  evidence for that key keeps being counted but does not replace it.
- invalidate: the fact keeps updating from evidence but its status stays
  `invalidated`: excluded from grounding, kept in the table.
- freeze / unfreeze: while frozen, passes fold no execution result logged after the
  freeze (other overrides still apply); after unfreeze the next pass catches up.
- reset_semantic: the identity's facts and consolidation state are archived to a file
  (its SHA-256 in the event) and dropped; learning starts over from the events after it.
"""

from robot_memory.consolidation.override_plan import (  # noqa: F401
    ACTIONS, FREEZE, INVALIDATE, OPERATOR_FACT, OPERATOR_RULE_VERSION, RESET_SEMANTIC,
    UNFREEZE, OverridePlan, fact_as_rendered, operator_fact, plan_overrides)
from robot_memory.consolidation.override_privacy import (  # noqa: F401
    OverridePrivacyRefused, screen_override)
from robot_memory.consolidation.override_records import (  # noqa: F401
    OverrideError, default_archive_path, record_freeze, record_invalidation,
    record_operator_fact, record_override, record_reset)

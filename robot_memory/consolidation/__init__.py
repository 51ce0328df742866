"""Deterministic episodic-to-semantic consolidation (rules v1)."""

from robot_memory.consolidation.consolidation_pass import (CONSOLIDATION_RUN, EXECUTION_RESULT,
                                                           ConcurrentPass, FactChange, PassReport,
                                                           consolidation_pass, facts_snapshot,
                                                           replay_snapshot)
from robot_memory.consolidation.rules import (FACT_KINDS, RULE_VERSION,
                                              ConsolidationConfigError, RulesConfig)
from robot_memory.event_kinds import KNOWLEDGE_CONFLICT, KNOWLEDGE_CONFLICT_RESOLVED

__all__ = ["CONSOLIDATION_RUN", "EXECUTION_RESULT", "FACT_KINDS", "KNOWLEDGE_CONFLICT",
           "KNOWLEDGE_CONFLICT_RESOLVED", "RULE_VERSION", "ConcurrentPass",
           "ConsolidationConfigError", "FactChange", "PassReport", "RulesConfig",
           "consolidation_pass", "facts_snapshot", "replay_snapshot"]

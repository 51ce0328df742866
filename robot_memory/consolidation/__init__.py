"""Deterministic episodic-to-semantic consolidation (rules v1)."""

from robot_memory.consolidation.consolidation_pass import (CONSOLIDATION_RUN, EXECUTION_RESULT,
                                                           ConcurrentPass, FactChange, PassReport,
                                                           consolidation_pass, facts_snapshot)
from robot_memory.consolidation.rules import FACT_KINDS, RULE_VERSION, RulesConfig

__all__ = ["CONSOLIDATION_RUN", "EXECUTION_RESULT", "FACT_KINDS", "RULE_VERSION",
           "ConcurrentPass", "FactChange", "PassReport", "RulesConfig", "consolidation_pass",
           "facts_snapshot"]

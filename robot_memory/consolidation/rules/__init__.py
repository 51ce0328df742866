"""Consolidation rules v1 (the paper "Episodic-to-Semantic
Consolidation Without Identity Drift", section 3.2): four fact kinds, each a small module
that adds up aggregated results into a mergeable state (add_outcome, add_values, merge)
and renders it (render). The contract: `Rule` in base.py, docs/rules.md."""

from robot_memory.consolidation.rules.base import (RULE_VERSION, STATUS_ACTIVE,
                                                   STATUS_CANDIDATE, STATUS_CONTESTED,
                                                   STATUS_INVALIDATED, ConsolidationConfigError,
                                                   Partials, RenderedFact, Rule, RulesConfig,
                                                   fact_key)
from robot_memory.consolidation.rules.interaction_pattern import InteractionPattern
from robot_memory.consolidation.rules.object_property import ObjectProperty
from robot_memory.consolidation.rules.skill_success_rate import SkillSuccessRate
from robot_memory.consolidation.rules.zone_risk import ZoneRisk

RULES: tuple[Rule, ...] = (SkillSuccessRate(), InteractionPattern(), ObjectProperty(),
                           ZoneRisk())
RULES_BY_KIND: dict[str, Rule] = {rule.kind: rule for rule in RULES}
FACT_KINDS = tuple(RULES_BY_KIND)

__all__ = ["FACT_KINDS", "RULES", "RULES_BY_KIND", "RULE_VERSION", "STATUS_ACTIVE",
           "STATUS_CANDIDATE", "STATUS_CONTESTED", "STATUS_INVALIDATED",
           "ConsolidationConfigError", "Partials", "RenderedFact", "Rule", "RulesConfig",
           "fact_key"]

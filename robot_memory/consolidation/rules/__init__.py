"""Consolidation rules by version: v1.0 (the paper "Episodic-to-Semantic Consolidation
Without Identity Drift", section 3.2), four fact kinds, each a small module that adds up
aggregated results into a mergeable state (add_outcome, add_values, merge) and renders it
(render); v2.0, the same but for skill_success_rate, which is conditional on the
parameters and follows regimes (skill_success_rate_v2.py). The contract: `Rule` in
base.py, docs/rules.md."""

from dataclasses import replace

from robot_memory.consolidation.rules.base import (DEFAULT_RULE_VERSION, RULE_VERSION,
                                                   RULE_VERSION_V2, RULE_VERSIONS,
                                                   STATUS_ACTIVE, STATUS_CANDIDATE,
                                                   STATUS_CONTESTED, STATUS_INVALIDATED,
                                                   ConsolidationConfigError, Partials,
                                                   RenderedFact, Rule, RulesConfig, fact_key)
from robot_memory.consolidation.rules.interaction_pattern import InteractionPattern
from robot_memory.consolidation.rules.object_property import ObjectProperty
from robot_memory.consolidation.rules.skill_success_rate import SkillSuccessRate
from robot_memory.consolidation.rules.skill_success_rate_v2 import SkillSuccessRateV2
from robot_memory.consolidation.rules.zone_risk import ZoneRisk

RULES_V1: tuple[Rule, ...] = (SkillSuccessRate(), InteractionPattern(), ObjectProperty(),
                              ZoneRisk())
RULES_V2: tuple[Rule, ...] = (SkillSuccessRateV2(), *RULES_V1[1:])
# Every rule set by the version it renders (RulesConfig.rule_version).
RULE_SETS: dict[str, tuple[Rule, ...]] = {RULE_VERSION: RULES_V1, RULE_VERSION_V2: RULES_V2}
RULES: tuple[Rule, ...] = RULE_SETS[DEFAULT_RULE_VERSION]
RULES_BY_KIND: dict[str, Rule] = {rule.kind: rule for rule in RULES}
FACT_KINDS = tuple(RULES_BY_KIND)


def rules_for(version: str) -> tuple[Rule, ...]:
    """The rule set of a version (RULE_VERSIONS)."""
    return RULE_SETS[version]


def rule_by_kind(kind: str, version: str) -> Rule:
    """The rule of `kind` in a version's set (the default set's for a version not known:
    an operator's fact)."""
    for rule in RULE_SETS.get(version, RULES):
        if rule.kind == kind:
            return rule
    raise KeyError(kind)


def rules_of_store(stored_version: str | None, config: RulesConfig,
                   rules: tuple[Rule, ...] | None = None
                   ) -> tuple[RulesConfig, tuple[Rule, ...]]:
    """(config, rules) a pass over a store uses: the version the store's states were built
    with (its newest consolidation_run's; None for a store no pass has run on yet: the
    configured one), so no state ever mixes two versions. The config comes back with
    that version (the rules label their facts with it); `rules` a caller brings (a rule
    being tried out) are used as given."""
    version = stored_version or config.rule_version
    if version not in RULE_SETS:
        raise ConsolidationConfigError(
            f"the store's facts were made by rules {version!r}, which this release does not "
            f"have (it has {list(RULE_SETS)})")
    if version != config.rule_version:
        config = replace(config, rule_version=version)
    return config, (tuple(rules) if rules is not None else RULE_SETS[version])


def reads_parameter_buckets(rules) -> bool:
    """Does one of the rules read the parameters per event-time bucket (a pass then asks
    the store for them: result_aggregates(parameter_buckets=parameter_bucket_ns(...)))?"""
    return any(getattr(rule, "parameter_buckets", False) for rule in rules)


def parameter_bucket_ns(rules, config: RulesConfig) -> int:
    """The width of the event-time buckets the rules read the parameters by (the bands'
    band_bucket_s), in ns; 0 when none reads them per bucket."""
    return int(config.band_bucket_s * 1e9) if reads_parameter_buckets(rules) else 0


__all__ = ["DEFAULT_RULE_VERSION", "FACT_KINDS", "RULES", "RULES_BY_KIND", "RULES_V1",
           "RULES_V2", "RULE_SETS", "RULE_VERSION", "RULE_VERSIONS", "RULE_VERSION_V2",
           "STATUS_ACTIVE", "STATUS_CANDIDATE", "STATUS_CONTESTED", "STATUS_INVALIDATED",
           "ConsolidationConfigError", "Partials", "RenderedFact", "Rule", "RulesConfig",
           "fact_key", "parameter_bucket_ns", "reads_parameter_buckets", "rule_by_kind",
           "rules_for",
           "rules_of_store"]

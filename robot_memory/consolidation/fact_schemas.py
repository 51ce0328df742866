"""The one shape of each fact kind's value, as its consumers read it (pydantic models).

What the rules of consolidation/rules/ render passes these (a test runs real passes
against them); an operator fact must pass them too, and is refused, or skipped when it
is already in the log, when it does not. Every field a consumer reads is typed here:
`served_fields` and `fact_element` (rate, recommended_parameters), the grounding index
and its facets (skill_id, target_class, environment; an object's target_class; a
zone's scope and the field the scope names), analogies.py (object_property's
target_class, property, band.median), priors.py (skill_success_rate's n, successes),
`format_grounding_block` in ros/client.py (interaction_pattern's failure_reason,
share_of_failures, failure_parameters; object_property's property and band.median;
zone_risk's failure_rate), the report (counts and rates, bands' quartiles) and the
dry-run diff; `explain` and `facts` show a value whole.

Required: what a consumer cannot go without, so what an operator fact must give.
Optional (absent, or None where the rules write null): what the rules always render
and consumers do without (counts an operator may not know, the contradiction test, the
decay-weighted view). A map of bands is never null (an empty map when absent).
Unknown fields are refused, so a misspelt field is named rather than ignored. Numbers
are JSON numbers (no strings, no booleans, nothing a float cannot hold); counts are
integers. docs/consolidation.md lists the required fields.

Validation costs microseconds a value: it is done where values come from outside (an
override, an operator fact in the log, a stored fact the rules did not make), never on
the facts the rules render, in a pass or in a delta: their holders read them fact by
fact and leave out one that fails.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NamedTuple

from pydantic import (BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr,
                      ValidationError, ValidationInfo, field_validator)

from robot_memory.canonical import canonical_json
from robot_memory.consolidation.rules.base import RULE_VERSION_V2, RULE_VERSIONS

# A finite JSON number (an int is taken as one, a bool or a string is not).
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Fraction = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0.0, le=1.0)]
Count = Annotated[int, Field(strict=True, ge=0)]
Name = Annotated[str, Field(strict=True, min_length=1)]
NonNegative = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0.0)]


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Band(_Shape):
    """A parameter's or a property's values: median and interquartile band (the rules
    give all; an operator gives at least the median)."""

    median: Number
    q1: Number | None = None
    q3: Number | None = None
    min: Number | None = None
    max: Number | None = None
    n: Count | None = None


class RateCounts(_Shape):
    n: Count
    successes: Count


class ContradictionTest(_Shape):
    recent: RateCounts
    older: RateCounts
    z: Number
    contested: StrictBool


class WeightedRate(_Shape):
    n: Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0.0)]
    successes: Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0.0)]
    rate: Fraction


class _FactValue(_Shape):
    """Fields every kind may carry: the rules write confidence and rule_version, and an
    operator fact is stored with source, operator and reason added."""

    confidence: Fraction | None = None
    rule_version: StrictStr | None = None
    source: StrictStr | None = None
    operator: StrictStr | None = None
    reason: StrictStr | None = None


class SkillSuccessRate(_FactValue):
    skill_id: Name
    target_class: StrictStr
    environment: StrictStr
    rate: Fraction | None = None  # served as success_rate (None: the fact has none)
    recommended_parameters: dict[StrictStr, Band] = {}  # served by median (never null)
    n: Count | None = None  # the fleet priors pool n and successes
    successes: Count | None = None
    failures: Count | None = None
    weighted: WeightedRate | None = None
    shrunk_rate: Fraction | None = None
    failure_reasons: dict[StrictStr, Count] | None = None
    most_common_failure: StrictStr | None = None
    contradiction_test: ContradictionTest | None = None


class InteractionPattern(_FactValue):
    skill_id: Name
    target_class: StrictStr
    failure_reason: StrictStr
    share_of_failures: Fraction
    failure_parameters: dict[StrictStr, Band] = {}
    count: Count | None = None
    failures: Count | None = None
    weighted_count: Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0.0)] | None \
        = None
    safety_relevant: StrictBool | None = None


class ObjectProperty(_FactValue):
    target_class: Name
    property: Name
    band: Band
    n: Count | None = None
    mean: Number | None = None


class ZoneRisk(_FactValue):
    scope: Literal["zone", "environment"]
    # The one the scope names is required (validated even when absent).
    zone: Annotated[StrictStr | None, Field(validate_default=True)] = None
    environment: Annotated[StrictStr | None, Field(validate_default=True)] = None
    failure_rate: Fraction
    n: Count | None = None
    incidents: Count | None = None
    safety_incidents: Count | None = None
    weighted_failure_rate: Fraction | None = None
    failure_reasons: dict[StrictStr, Count] | None = None
    most_common_failure: StrictStr | None = None
    contradiction_test: ContradictionTest | None = None

    @field_validator("zone", "environment")
    @classmethod
    def _named_by_scope(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and info.data.get("scope") == info.field_name:
            raise ValueError(f"required when scope is {info.field_name!r}")
        return value


class BandEvidence(_Shape):
    """One parameter band's evidence in the current regime (rules v2.0)."""

    band: StrictStr  # the grid value as repr(float); "" for a key without parameters
    n: Count
    successes: Count
    weighted_n: NonNegative
    weighted_successes: NonNegative
    rate: Fraction  # decay-weighted
    lcb: Fraction  # Wilson lower bound of the decay-weighted rate


class RecommendedBand(Band):
    """The recommended band of a parameter (rules v2.0): every quantile is the band's
    value, with the band's own evidence in the current regime."""

    q1: Number
    q3: Number
    min: Number
    max: Number
    n: Count
    successes: Count
    rate: Fraction
    lcb: Fraction


class BandCounts(_Shape):
    band: StrictStr
    n: Count
    successes: Count


class PreviousRegime(_Shape):
    since_ns: StrictInt | None  # None: from the first evidence
    until_ns: StrictInt
    parameter_evidence: dict[StrictStr, list[BandCounts]]


class ChangeTest(_Shape):
    """The CUSUM that confirmed the current regime's boundary."""

    statistic: Number
    threshold: Number
    drift: Number
    direction: Literal["down", "up"]
    reference_rate: Fraction
    confirmed_bucket: StrictInt
    name: StrictStr
    band: StrictStr


class Regime(_Shape):
    since_ns: StrictInt | None  # None: no change found (the regime is all evidence)
    boundary_bucket: StrictInt | None
    changes: Count
    test: ChangeTest | None
    previous: PreviousRegime | None


class ChangeSuspected(_Shape):
    name: StrictStr
    band: StrictStr
    direction: Literal["down", "up"]
    statistic: Number
    threshold: Number


class SkillSuccessRateV2(_FactValue):
    """skill_success_rate as rules v2.0 render it: conditional on the parameters, from
    the current regime's evidence (docs/consolidation.md#regimes)."""

    skill_id: Name
    target_class: StrictStr
    environment: StrictStr
    rate: Fraction
    recommended_parameters: dict[StrictStr, RecommendedBand]
    n: Count
    successes: Count
    failures: Count
    weighted: WeightedRate
    shrunk_rate: Fraction
    parameter_evidence: dict[StrictStr, list[BandEvidence]]
    regime: Regime
    change_suspected: ChangeSuspected | None
    failure_reasons: dict[StrictStr, Count]
    most_common_failure: StrictStr | None
    rule_version: Literal["v2.0"]


SCHEMAS: dict[str, type[_FactValue]] = {
    "skill_success_rate": SkillSuccessRate, "interaction_pattern": InteractionPattern,
    "object_property": ObjectProperty, "zone_risk": ZoneRisk}
# A value that says it was rendered by rules v2.0 is held to these where they differ.
SCHEMAS_V2: dict[str, type[_FactValue]] = {**SCHEMAS, "skill_success_rate": SkillSuccessRateV2}


def schema_of(kind: str, value: Any) -> type[_FactValue] | None:
    """The model a value of `kind` is held to: by the rule version it names (v2.0's
    where it has its own), else the kind's (an operator fact's shape)."""
    if isinstance(value, dict) and value.get("rule_version") == RULE_VERSION_V2:
        return SCHEMAS_V2.get(kind)
    return SCHEMAS.get(kind)


# What an operator fact must give, by kind (zone_risk: also the field its scope names).
REQUIRED: dict[str, tuple[str, ...]] = {
    kind: tuple(name for name, info in schema.model_fields.items() if info.is_required())
    for kind, schema in SCHEMAS.items()}


class ValueProblem(NamedTuple):
    """Why a fact cannot be taken: the field (for the value's own, `value.` and
    pydantic's loc, dotted) and what is wrong with it."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def _problem(error: ValidationError) -> ValueProblem:
    errors = error.errors(include_url=False)
    first = errors[0]
    message = first["msg"]
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more)"
    return ValueProblem(".".join(["value", *map(str, first["loc"])]), message)


def _keys_sorted(value: Any) -> Any:
    """`value` with every mapping's keys in sorted order (as canonical JSON has them)."""
    if isinstance(value, dict):
        return {key: _keys_sorted(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, list):
        return [_keys_sorted(item) for item in value]
    return value


def value_problem(kind: str, value: Any) -> ValueProblem | None:
    """None when `value` has the shape of `kind`'s values (or `kind` has no schema: a
    rule being tried out), else the first field that does not."""
    schema = schema_of(kind, value)
    if schema is None:
        return None
    try:
        schema.model_validate(value)
    except ValidationError:
        # Named as the log gives the value back (canonical JSON sorts its keys): which
        # error pydantic lists first follows a mapping's key order, and a value must be
        # named alike whether it comes as given or from the log.
        try:
            schema.model_validate(_keys_sorted(value))
        except ValidationError as exc:
            return _problem(exc)
    try:  # what the log stores: text that is not UTF-8 (a lone surrogate) is not JSON
        canonical_json(value)
    except (TypeError, ValueError) as exc:
        return ValueProblem("value", f"not storable as JSON: {exc}")
    return None


def operator_fact_problem(payload: Any) -> ValueProblem | None:
    """None when an operator_fact override's payload (as logged) can be applied, else
    the first field that cannot: fact_kind, fact_key, confidence, or the value's own."""
    if not isinstance(payload, dict):
        return ValueProblem("payload", "the override is not a JSON object")
    kind = payload.get("fact_kind")
    if kind.__class__ is not str or kind not in SCHEMAS:
        return ValueProblem("fact_kind", f"{kind!r} is not one of {list(SCHEMAS)}")
    if not isinstance(payload.get("fact_key"), str) or not payload["fact_key"].strip():
        return ValueProblem("fact_key", "a non-empty string is required")
    confidence = payload.get("confidence")
    if confidence.__class__ not in (int, float) or not 0.0 <= confidence <= 1.0:
        return ValueProblem("confidence", f"{confidence!r} is not a number in [0, 1]")
    for name in ("operator", "reason"):
        if not isinstance(payload.get(name), str):
            return ValueProblem(name, "a string is required")
    return value_problem(kind, payload.get("value"))


def stored_fact_problem(kind: str, rule_version: str, value_of) -> ValueProblem | None:
    """None when a stored fact can be loaded (published, indexed, served), else why not.
    A fact the rules made (a version of RULE_VERSIONS) is taken as its rule renders it, unchecked:
    the holders leave out one that still fails them, fact by fact. Any other (an
    operator's, one of unknown origin) came from outside and is checked against its
    kind's shape. `value_of`: the value, called only when it is checked."""
    if rule_version in RULE_VERSIONS:
        return None
    try:
        value = value_of()
    except ValueError as exc:  # not JSON
        return ValueProblem("value", f"not JSON: {exc}")
    return value_problem(kind, value)

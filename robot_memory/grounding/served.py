"""What a served fact carries of its value beside value_json.

A SemanticFact (on `facts`, `facts_delta` and in `ground`'s answers) carries a fact's
whole value as canonical JSON, and two of its fields again as typed fields a planner can
read without parsing it: the success rate and each recommended parameter's median
(consolidation/fact_schemas.py types both). ros/conversions.py puts them in message
objects, wire/semantic_fact.py in bytes. ROS-free.
"""

from __future__ import annotations


def served_fields(value: dict) -> tuple[float | None, list[tuple[str, float]]]:
    """What a SemanticFact carries of its fact's value beside value_json: the success
    rate (None: the kind has none) and each recommended parameter's median, by name."""
    rate = value.get("rate")
    return (None if rate is None else float(rate),
            [(name, float(band["median"]))
             for name, band in sorted(value.get("recommended_parameters", {}).items())])

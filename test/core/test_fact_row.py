"""One typed fact row: FactRow is made by keyword (or from its stored columns in order),
holds its parsed value outside its fields, and is what a pass's changes write."""

import dataclasses
import inspect

import pytest

from robot_memory.consolidation.changes import fact_change, fact_write, facts_written
from robot_memory.consolidation.rules import RULE_VERSION, RenderedFact
from robot_memory.store import FactRow, FactWrite, fact_row_from_columns

COLUMNS = (4, "skill_success_rate", "grasp + cup + lab", '{"n":3,"rate":0.5}', "active", 0.4,
           3, RULE_VERSION, 17, 1_000)
FIELDS = ("id", "kind", "key", "value_json", "status", "confidence", "n_observations",
          "rule_version", "last_supporting_event_id", "last_updated_ns")


def test_the_constructor_takes_the_columns_by_name_in_order():
    assert tuple(inspect.signature(FactRow).parameters) == FIELDS
    assert tuple(f.name for f in dataclasses.fields(FactRow) if f.compare) == FIELDS
    fact = FactRow(**dict(zip(FIELDS, COLUMNS)))
    assert fact == fact_row_from_columns(COLUMNS)
    assert hash(fact) == hash(fact_row_from_columns(COLUMNS))
    assert fact.as_write() == FactWrite(*COLUMNS)


def test_the_value_is_parsed_once_and_is_no_part_of_the_fact():
    fact, other = fact_row_from_columns(COLUMNS), fact_row_from_columns(COLUMNS)
    assert fact.peek_value() == {"n": 3, "rate": 0.5}
    assert fact.value is fact.value and fact.value == {"n": 3, "rate": 0.5}
    assert fact == other and "_parsed" not in repr(fact)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fact.status = "contested"
    assert dataclasses.replace(fact, value_json='{"n":4}').value == {"n": 4}


def rendered(**changes) -> RenderedFact:
    fields = {"kind": "skill_success_rate", "key": "grasp + cup + lab",
              "value": {"rate": 0.5, "n": 3}, "status": "active", "confidence": 0.4,
              "n_observations": 3, "last_supporting_event_id": 17, "last_updated_ns": 1_000,
              "conflict": {"contested": False}}
    return RenderedFact(**{**fields, **changes})


def test_a_change_writes_the_rendered_fact_as_a_row():
    old = fact_row_from_columns(COLUMNS)
    assert fact_change(("skill_success_rate", old.key), rendered(), old) is None  # same
    change = fact_change(("skill_success_rate", old.key), rendered(confidence=0.6), old)
    assert change.new == dataclasses.replace(old, confidence=0.6)
    assert (change.kind, change.key, change.conflict) == (old.kind, old.key,
                                                          {"contested": False})
    assert change.value_json == old.value_json and change.new_value == {"n": 3, "rate": 0.5}
    assert fact_write(change) == FactWrite(*COLUMNS[:5], 0.6, *COLUMNS[6:])
    assert facts_written(None, [change]) == [change.new]  # nothing read back
    new = fact_change(("skill_success_rate", "other"), rendered(key="other"), None)
    assert new.old is None and new.new.id is None and fact_write(new).row_id is None


def test_a_stored_fact_renders_back_as_it_is():
    fact = fact_row_from_columns(COLUMNS)
    back = RenderedFact.of_row(fact)
    assert back.conflict is None and back.value == fact.value
    assert back.stored_as(fact.id, fact.value_json) == fact

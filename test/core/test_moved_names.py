"""The public names of modules that moved in the reshaping still resolve, for one
release, with a DeprecationWarning that names the new place."""

import warnings

import pytest

import robot_memory.grounding
from robot_memory.grounding import index


@pytest.mark.parametrize("name", sorted(robot_memory.grounding._MOVED))
def test_an_old_name_warns_and_is_the_new_object(name):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = getattr(robot_memory.grounding, name)
    assert old is getattr(index, name)
    assert any(issubclass(w.category, DeprecationWarning) and
               f"robot_memory.grounding.index.{name}" in str(w.message) for w in caught)


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        robot_memory.grounding.no_such_name  # noqa: B018

"""plain_canonical_json against canonical_json: the same text for any plain value, or the
same exception. A pass writes states and facts with the first, so a fact it writes is
byte-equal to the one the per-event engine (canonical_json) wrote, and a state decoded
with plain_json_loads is the one encoded."""

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_memory import canonical
from robot_memory.canonical import (canonical_json, plain_canonical_json, plain_json_loads,
                                    sha256_hex)

# Magnitudes where orjson and repr write floats differently (1e-9 .. 1e-4), around them,
# and anywhere.
floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=1e-12, max_value=1e-3),
    st.floats(min_value=-1e-3, max_value=-1e-12),
    st.builds(lambda mantissa, exponent: round(mantissa * 10.0 ** exponent, 6),
              st.floats(0, 10), st.integers(-9, 20)))
ints = st.one_of(st.integers(-(2 ** 63), 2 ** 64), st.integers())
# Any code point, lone surrogates and control characters included.
texts = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
scalars = st.one_of(st.none(), st.booleans(), ints, floats, texts)
plain = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(texts, inner, max_size=5)), max_leaves=30)


def encoded(encode, value):
    try:
        return "text", encode(value)
    except (TypeError, ValueError) as exc:
        return "raises", type(exc)


@settings(max_examples=600, deadline=None)
@given(plain)
def test_same_text_or_same_error_as_canonical_json(value):
    assert encoded(plain_canonical_json, value) == encoded(canonical_json, value)


@pytest.mark.parametrize("value", [
    1e-05, 1.5e-05, -9.9e-05, 1e-06, 5e-09, 1e-10, 1e-4, 1e16, 1e-300, 5e-324, -0.0,
    {"a": [1e-06, {"b": 2e-05}]}, "a e-5 0.00001 null", 2 ** 64, -(2 ** 63) - 1,
    {"x": None}, {1: "an int key", "2": 2}, [float("nan")], {"y": float("inf")},
    {"z": -float("inf")}, "\ud800"])
def test_the_cases_orjson_writes_differently(value):
    assert encoded(plain_canonical_json, value) == encoded(canonical_json, value)


def test_refuses_what_canonical_json_refuses():
    for bad in ({"k": {1, 2}}, b"bytes", object()):
        with pytest.raises(TypeError):
            plain_canonical_json(bad)
    with pytest.raises(ValueError):
        plain_canonical_json({"rate": math.nan})
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError):
        plain_canonical_json(loop)


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 63), 2 ** 63 - 1),
                              st.floats(allow_nan=False, allow_infinity=False),
                              st.text(max_size=12)),
                    lambda inner: st.one_of(st.lists(inner, max_size=5),
                                            st.dictionaries(st.text(max_size=8), inner,
                                                            max_size=5)),
                    max_leaves=30))
def test_plain_json_loads_reads_back_what_was_written(value):
    text = plain_canonical_json(value)
    assert plain_json_loads(text) == json.loads(text)
    assert canonical_json(plain_json_loads(text)) == text


def test_exact_without_orjson(monkeypatch):
    monkeypatch.setattr(canonical, "orjson", None)
    value = {"b": [1e-05, 0.5, None], "a": "é"}
    assert plain_canonical_json(value) == canonical_json(value)
    assert plain_json_loads(canonical_json(value)) == value


# Fixed bytes: the identity hash, the hash chain and the tier digest are taken over them,
# so a change of encoder (or of Python) that writes one byte differently fails here.
GOLDEN = [
    (None, b"null"), (True, b"true"), (False, b"false"), (0, b"0"), (-1, b"-1"),
    (2 ** 64, b"18446744073709551616"), (-(2 ** 63) - 1, b"-9223372036854775809"),
    (10 ** 30, b"1000000000000000000000000000000"),
    (0.1, b"0.1"), (1.0, b"1.0"), (-0.0, b"-0.0"), (1e-05, b"1e-05"), (1.5e-07, b"1.5e-07"),
    (1e16, b"1e+16"), (1.7976931348623157e308, b"1.7976931348623157e+308"),
    (5e-324, b"5e-324"), (123456.789, b"123456.789"),
    (0.1 + 0.2, b"0.30000000000000004"),
    ("", b'""'), ("plain", b'"plain"'),
    ("\u00e9 \u00fc \u00df", b'"\xc3\xa9 \xc3\xbc \xc3\x9f"'),
    ("\u6c34 \U0001f916", b'"\xe6\xb0\xb4 \xf0\x9f\xa4\x96"'),
    ('quote " backslash \\ slash /', b'"quote \\" backslash \\\\ slash /"'),
    ("\n\t\r\b\f \x00 \x1f \x7f", b'"\\n\\t\\r\\b\\f \\u0000 \\u001f \x7f"'),
    ("\u2028\u2029", b'"\xe2\x80\xa8\xe2\x80\xa9"'),
    ([], b"[]"), ({}, b"{}"), ([1, [2, [3, {}]]], b"[1,[2,[3,{}]]]"),
    ({"b": 1, "a": 2, "B": 3, "\u00e9": 4, "aa": 5, "": 6, "10": 7, "9": 8},
     b'{"":6,"10":7,"9":8,"B":3,"a":2,"aa":5,"b":1,"\xc3\xa9":4}'),
    ({"skill": "manipulation.grasp", "success": True, "duration_s": 1.25,
      "parameters": {"grip_force": 12.5, "approach": "top"}, "observations": {},
      "tags": ["a", None, 1e-06]},
     b'{"duration_s":1.25,"observations":{},"parameters":{"approach":"top","grip_force":12.5},'
     b'"skill":"manipulation.grasp","success":true,"tags":["a",null,1e-06]}'),
]


@pytest.mark.parametrize("value, expected", GOLDEN, ids=[repr(v)[:30] for v, _ in GOLDEN])
def test_canonical_bytes_are_the_fixed_ones(value, expected):
    assert canonical_json(value).encode("utf-8") == expected
    assert plain_canonical_json(value).encode("utf-8") == expected


def test_a_lone_surrogate_is_written_as_it_is():  # then refused where the text is hashed
    assert canonical_json("\ud800") == '"\ud800"'
    with pytest.raises(UnicodeEncodeError):
        sha256_hex(canonical_json("\ud800"))


def test_the_hash_of_a_document_is_the_fixed_one():
    value, _ = GOLDEN[-1]
    assert sha256_hex(canonical_json(value)) == (
        "5331313564c36c0b9d9c3320c39c3429087607ae5e1495491f44d6baa13f3345")


def test_a_value_that_contains_itself_is_refused():
    loop: dict = {}
    loop["self"] = loop
    with pytest.raises(ValueError):
        canonical_json(loop)

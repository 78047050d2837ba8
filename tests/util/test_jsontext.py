"""``cairn.util.jsontext.indented`` writes what ``json.dumps`` with an indent writes, for every
value (JSON's own types, and the ones ``json`` converts or refuses)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.util.jsontext import indented

SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=30,
)


def reference(value: Any, indent: int = 2) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=(",", ": "))


@pytest.mark.slow
@given(VALUES, st.integers(0, 4))
def test_the_same_text_as_json(value: Any, indent: int) -> None:
    assert indented(value, indent) == reference(value, indent)


@pytest.mark.parametrize(
    "value",
    [
        {1: "a", None: [], False: {}},  # keys json turns into text
        {"a": {2.5: [1, {"b": []}]}},
        ["\ud800 lone surrogate", "é", "\x00"],
        [float("nan"), float("inf"), -float("inf"), -0.0, 1e300],
    ],
)
def test_values_json_converts(value: Any) -> None:
    assert indented(value) == reference(value)


@pytest.mark.parametrize("value", [{"a": object()}, [{1, 2}], {(1, 2): "tuple key"}])
def test_values_json_refuses_raise_its_error(value: Any) -> None:
    with pytest.raises(TypeError) as ours:
        indented(value)
    with pytest.raises(TypeError) as theirs:
        reference(value)
    assert str(ours.value) == str(theirs.value)

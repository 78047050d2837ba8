"""The one JSON-as-YAML codec: what cairn writes, json and PyYAML read as the same data."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.util import yaml_io

texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
data = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(texts, data, max_size=5))
def test_what_is_dumped_pyyaml_and_json_read_alike(value: dict[str, object]) -> None:
    text = yaml_io.dump(value)
    assert json.loads(text) == value
    assert yaml.load(text, Loader=yaml.SafeLoader) == value  # any YAML tool, not our reader
    assert yaml_io.safe_load(text) == value


@pytest.mark.parametrize("char", ["\x85", "\u2028", "\u2029", "\ufeff", "\x7f", "\x9f", "\uffff"])
def test_characters_yaml_reads_otherwise_are_escaped(char: str) -> None:
    text = yaml_io.dump({"k": f"a{char}b"})
    assert char not in text and yaml.load(text, Loader=yaml.SafeLoader) == {"k": f"a{char}b"}


def test_a_number_that_is_not_finite_is_refused_not_written_as_text() -> None:
    with pytest.raises(ValueError):
        yaml_io.dump({"cost": float("nan")})
    assert yaml_io.safe_load('{"cost": NaN}') == {"cost": "NaN"}  # YAML's reading, not json's


def test_hand_written_yaml_is_read_by_pyyaml() -> None:
    assert yaml_io.safe_load("a: 1\nb: [x, y]\n") == {"a": 1, "b": ["x", "y"]}
    assert yaml_io.safe_load("{a: 1}") == {"a": 1}  # a YAML flow mapping is not JSON


def test_a_float_with_an_exponent_gets_its_point() -> None:
    value = {"cost": 1e-05, "big": [1e16, -2.5e-07], "text": '"x": 1e-05'}
    text = yaml_io.dump(value)
    assert "1.0e-05" in text and '"x\\": 1e-05"' in text  # text is left as it is
    assert yaml.load(text, Loader=yaml.SafeLoader) == value == json.loads(text)

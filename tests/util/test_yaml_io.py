"""The flat reader and writer agree with PyYAML on everything they accept, and accept what cairn
writes (markers, change-summary front matter)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.util import yaml_io

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
KEYS = st.one_of(
    st.from_regex(r"[a-z_]{1,12}", fullmatch=True),
    st.sampled_from(["no", "yes", "on", "off", "null", "true", "y", "n"]),
)
SCALARS = st.one_of(
    st.none(),
    st.integers(-(10**12), 10**12),
    st.booleans(),
    st.floats(min_value=0, max_value=1e17, allow_nan=False, allow_infinity=False),
    st.sampled_from(
        [
            "impl",
            "yes",
            "No",
            "null",
            "~",
            "",
            "2026-11-30T10:15:00+00:00",
            "2026-11-30",
            "20261130-101500Z",
            "0x1f",
            "0o17",
            "017",
            "1_000",
            "1e5",
            "1.5",
            "0.84",
            "01.5",
            "1.",
            ".inf",
            "12:30",
            "a:b",
            "a:",
            ":a",
            "@x",
            "x@y",
            "-x",
            "refs/cairn/wip/T-1",
            "ab" * 20,
            "a b",
            "it's",
            "é",
            "<<",
            "=",
            "#x",
            "x#y",
            "'q'",
            "build-3",
        ]
    ),
    st.text(st.characters(codec="ascii", exclude_categories=["Cc"]), max_size=10),
)
FLAT = st.dictionaries(
    KEYS, st.one_of(SCALARS, st.dictionaries(KEYS, SCALARS, max_size=4)), max_size=6
)


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(FLAT)
def test_writes_what_pyyaml_writes(data: dict[str, Any]) -> None:
    expected = yaml.dump(data, Dumper=DUMPER, sort_keys=False, allow_unicode=True)
    flat = yaml_io.dump_flat(data)
    assert flat is None or flat == expected
    assert yaml_io.safe_dump(data, sort_keys=False, allow_unicode=True) == expected


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(FLAT)
def test_reads_what_pyyaml_reads(data: dict[str, Any]) -> None:
    text = yaml.dump(data, Dumper=DUMPER, sort_keys=False, allow_unicode=True)
    expected = yaml.load(text, Loader=LOADER)
    flat = yaml_io.load_flat(text)
    assert flat is None or flat == expected
    assert yaml_io.safe_load(text) == expected


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                ["phase", "skill", "round", "owner", "  pid", "  host", "x_y", "no", "  on"]
            ),
            st.text(st.characters(codec="ascii", exclude_categories=["Cc"]), max_size=12),
        ),
        max_size=6,
    )
)
def test_reads_hand_written_lines_as_pyyaml_does(lines: list[tuple[str, str]]) -> None:
    text = "".join(f"{key}: {value}\n" for key, value in lines)
    flat = yaml_io.load_flat(text)
    if flat is not None:
        assert flat == yaml.load(text, Loader=LOADER)


def test_what_cairn_writes_takes_the_flat_path() -> None:
    marker = {
        "version": 1,
        "skill": "impl",
        "phase": "implement",
        "round": 2,
        "started_at": "2026-11-30T10:15:00+00:00",
        "ticket": "PROJ-12",
        "run": "20261130-101500Z",
        "owner": {"host": "build-3", "pid": 48213, "boot_id": "0f6c2a8e-4b1d-4a51-9a3e"},
        "snapshot": {"ref": "refs/cairn/wip/PROJ-12", "commit": "5aa0bec1" * 5},
    }
    front = {"format": 1, "ticket": "PROJ-12", "run": None, "mode": "review", "round": 2}
    usage = {
        **front,
        "usage": {"input_tokens": 181200, "output_tokens": 950, "cost_usd": 0.84},
        "blocked": None,
    }
    for data in (marker, front, usage):
        text = yaml_io.dump_flat(data)
        assert text is not None and text == yaml.dump(
            data, Dumper=DUMPER, sort_keys=False, allow_unicode=True
        )
        assert yaml_io.load_flat(text) == data


@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(
    st.one_of(
        st.text(st.sampled_from("0123456789-+._:eExXbBoOTZtz ~yYnNaflsuNIi<="), max_size=12),
        st.text(st.characters(codec="ascii", exclude_categories=["Cc"]), max_size=10),
        st.sampled_from(["yes", "On", "OFF", "NULL", "-0b1", "0x_", "1:20", "1.5e+3", ".NaN"]),
        st.sampled_from(["2026-1-2 3:04:05", "2026-11-30T10:15:00+00:00", "+.inf", "1__0"]),
    )
)
def test_plain_scalar_tags_never_contradict_pyyaml(value: str) -> None:
    """A definite answer is PyYAML's; "other" only says: ask PyYAML."""
    resolver = yaml.resolver.Resolver()
    tag: str = resolver.resolve(  # type: ignore[no-untyped-call]  # types-PyYAML leaves it untyped
        yaml.nodes.ScalarNode, value, (True, False)
    )
    expected = tag.rsplit(":", 1)[-1]
    assert yaml_io.plain_scalar_tag(value) in (expected, "other"), value


def test_what_cairn_writes_gets_a_definite_tag() -> None:
    for value, tag in [
        ("impl", "str"),
        ("PROJ-12", "str"),
        ("20261130-101500Z", "str"),
        ("5aa0bec1" * 5, "str"),
        ("refs/cairn/wip/PROJ-12", "str"),
        ("build-3", "str"),
        ("2026-11-30T10:15:00+00:00", "timestamp"),
        ("48213", "int"),
        ("null", "null"),
        ("yes", "bool"),
    ]:
        assert yaml_io.plain_scalar_tag(value) == tag, value

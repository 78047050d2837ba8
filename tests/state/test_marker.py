"""The marker: round-trip, the five original fields, and the fast reader agreeing with YAML."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.errors import BadInput
from cairn.state import marker
from cairn.state.owner import Owner

WHEN = datetime(2026, 11, 30, 10, 15, tzinfo=UTC)
texts = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=30
)
times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
).map(lambda d: d.replace(microsecond=0))
markers = st.builds(
    marker.Marker,
    skill=texts,
    phase=texts,
    round=st.none() | st.integers(0, 99),
    task=st.none() | st.integers(0, 999),
    started_at=times,
    last_updated=times,
    ticket=st.none() | st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,20}", fullmatch=True),
    run=st.none() | st.just("20261130-101500Z-2"),
    owner=st.none()
    | st.builds(
        Owner,
        host=texts,
        pid=st.integers(1, 2**22),
        pid_started_at=st.none() | times,
        boot_id=st.none() | texts,
    ),
    dispatch=st.none()
    | st.builds(
        marker.DispatchRecord,
        role=texts,
        turn=st.integers(0, 500),
        max_turns=st.none() | st.integers(1, 500),
    ),
    snapshot=st.none()
    | st.builds(marker.SnapshotRef, ref=texts, commit=st.just("ab" * 20), at=times),
)


def pyyaml_load(text: str) -> Any:
    """PyYAML itself, not cairn's yaml_io (whose flat reader is what is being checked)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(markers)
def test_render_parse_round_trip(m: marker.Marker) -> None:
    text = marker.render(m)
    assert marker.parse(text, Path("m")) == m
    fast = marker._fast_load(text)
    assert fast is None or fast == pyyaml_load(text)


def test_typical_marker_takes_the_fast_path() -> None:
    m = marker.Marker(
        phase="implement",
        round=2,
        task=5,
        started_at=WHEN,
        last_updated=WHEN,
        ticket="PROJ-12",
        run="20261130-101500Z",
        owner=Owner(host="build-3", pid=42, pid_started_at=WHEN, boot_id="0f6c-2a8e"),
        dispatch=marker.DispatchRecord(role="coder", turn=3, max_turns=150),
        snapshot=marker.SnapshotRef(ref="refs/cairn/wip/PROJ-12", commit="ab" * 20, at=WHEN),
    )
    text = marker.render(m)
    assert marker._fast_load(text) == pyyaml_load(text)


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["phase", "skill", "round", "owner", "  pid", "  host", "x_y"]),
            st.text(st.characters(codec="ascii", exclude_categories=["Cc"]), max_size=12),
        ),
        max_size=6,
    )
)
def test_fast_reader_never_disagrees_with_yaml(lines: list[tuple[str, str]]) -> None:
    text = "".join(f"{key}: {value}\n" for key, value in lines)
    fast = marker._fast_load(text)
    if fast is None:
        return
    assert fast == pyyaml_load(text)


def test_five_original_fields_and_offsets() -> None:
    m = marker.parse(
        "skill: impl\nphase: code-reviewer\nround: 2\n"
        "started_at: 2026-11-29T10:00:00+02:00\nlast_updated: 2026-11-29 11:00:00\n",
        Path("m"),
    )
    assert m.started_at == datetime(2026, 11, 29, 10, tzinfo=timezone(timedelta(hours=2)))
    assert m.last_updated == datetime(2026, 11, 29, 11, tzinfo=UTC)
    assert (m.owner, m.task, m.version) == (None, None, 1)


def test_rendered_times_carry_an_offset() -> None:
    text = marker.render(marker.Marker(phase="p", started_at=WHEN, last_updated=WHEN))
    assert "started_at: '2026-11-30T10:15:00+00:00'" in text


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("phase: [unclosed\n", "not valid YAML at line"),
        ("just text\n", "not a YAML mapping"),
        ("phase: p\nstarted_at: soon\nlast_updated: 2026-11-29\n", "started_at"),
        ("skill: impl\n", "phase"),
        ("version: 2\nphase: p\nstarted_at: 2026-11-29\nlast_updated: 2026-11-29\n", "newer"),
    ],
)
def test_bad_markers_name_the_problem(text: str, needle: str) -> None:
    with pytest.raises(BadInput, match=needle) as caught:
        marker.parse(text, Path("/state/m.yaml"))
    assert "/state/m.yaml" in str(caught.value)
    assert "\n" not in str(caught.value)

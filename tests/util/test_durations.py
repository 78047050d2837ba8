"""Human durations: parse_duration and format_duration."""

from __future__ import annotations

import pytest

from cairn.util.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("30m", 1800),
        ("24h", 86400),
        ("14d", 14 * 86400),
        ("2w", 14 * 86400),
        ("0s", 0),
        ("1.5h", 5400),
        (" 14D ", 14 * 86400),
        ("1 d", 86400),
        ("0.5m", 30),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    ["abc", "-3d", "14x", "", " ", "d", "1e3", "3 days", "1h30m", "1.d", "+3d", "1,5h", "5", "0"],
)
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_duration(text)
    assert repr(text) in str(caught.value)
    assert "14d" in str(caught.value)  # names the accepted forms


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (1.5, "1.5s"),
        (45, "45s"),
        (90, "90s"),
        (60, "1m"),
        (1800, "30m"),
        (5400, "90m"),
        (3600, "1h"),
        (86400, "1d"),
        (3 * 86400, "3d"),
        (14 * 86400, "2w"),
        (15 * 86400, "15d"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["5", "0", " 14 ", "1.5"])
def test_a_bare_number_is_refused_naming_the_unit_to_add(text: str) -> None:
    with pytest.raises(ValueError, match="has no unit") as caught:
        parse_duration(text)
    bare = text.strip()
    assert f"{bare}s" in str(caught.value) and f"{bare}d" in str(caught.value)

"""Human durations: ``90s``, ``30m``, ``24h``, ``14d``, ``2w`` (or a bare number of seconds)."""

from __future__ import annotations

import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_FORM = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw]?)")


def parse_duration(text: str) -> float:
    """Seconds in ``text``; ValueError naming the accepted forms when it is not a duration."""
    match = _FORM.fullmatch(text.strip().lower())
    if not match:
        raise ValueError(f"{text!r} is not a duration; use forms like 90s, 30m, 24h, 14d, 2w")
    number, unit = match.groups()
    return float(number) * _UNITS[unit or "s"]


def format_duration(seconds: float) -> str:
    for unit in ("w", "d", "h", "m"):
        size = _UNITS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"

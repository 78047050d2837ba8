"""Human durations: ``90s``, ``30m``, ``24h``, ``14d``, ``2w``. The unit is required: a bare
number is refused, since no one reading ``5`` can tell seconds from days."""

from __future__ import annotations

import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_FORM = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_BARE = re.compile(r"\d+(?:\.\d+)?")
FORMS = "90s, 30m, 24h, 14d, 2w"


def parse_duration(text: str) -> float:
    """Seconds in ``text``; ValueError naming the problem and the accepted forms otherwise."""
    cleaned = text.strip().lower()
    match = _FORM.fullmatch(cleaned)
    if match:
        number, unit = match.groups()
        return float(number) * _UNITS[unit]
    if _BARE.fullmatch(cleaned):
        raise ValueError(
            f"{text!r} has no unit; give one, e.g. {cleaned}s, {cleaned}m or {cleaned}d "
            f"(forms: {FORMS})"
        )
    raise ValueError(f"{text!r} is not a duration; use forms like {FORMS}")


def format_duration(seconds: float) -> str:
    for unit in ("w", "d", "h", "m"):
        size = _UNITS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"

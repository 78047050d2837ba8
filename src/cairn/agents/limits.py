"""Knowing a limit when an agent hits one: an agent's failed dispatch classified as a rate
limit, a usage limit (with its reset time when the agent says it), refused credentials, or
another error.

The adapters call ``classify`` with what they know of a failure (the agent's error text, the
API's HTTP status, a reset time the stream gave) and put the ``Failure`` in the dispatch's
``Result``; the orchestrator decides what a limit means (``agent.on_limit``). ``describe`` is
the one line every place shows (the cutoff, the summary's status, catch-up, ``--json``,
notifications): ``usage limit of claude-code; resets 14:00 UTC``.

What the agents say, and what it is (docs/agents.md, "Knowing a limit"):

- ``usage_limit``: Claude Code's ``Claude AI usage limit reached|<epoch>``, ``…limit will reset
  at 3pm (America/Bogota)``, ``5-hour limit reached ∙ resets 5am``, ``You've hit your 5-hour
  limit · resets Dec 5, 5:02pm (UTC)``, ``Weekly limit reached · resets Aug 20``; the Anthropic
  spend limit (``You have reached your specified API usage limits. You will regain access on
  2026-04-01 at 00:00 UTC.``, ``enforced_spend_limit_reached``); Codex's ``You've hit your usage
  limit. … try again at 3:42 PM.`` (or ``at Mar 10th, 2026 3:39 AM``, ``in 2 days 17 hours 14
  minutes``, ``later``), its 429 body ``usage_limit_reached`` (``resets_at``,
  ``resets_in_seconds``) and ``Quota exceeded. Check your plan and billing details.``; and a 429
  whose reset time the stream gave (Claude's ``rate_limit_event`` rejected).
- ``rate_limit``: HTTP 429 and 529, ``rate_limit_error``, ``overloaded_error``, Codex's
  ``exceeded retry limit, last status: 429``.
- ``auth``: HTTP 401 and 403, ``authentication_error``, ``permission_error``, an invalid key.
- never a limit: ``context limit``, ``prompt is too long``.

A reset time given as a clock time (``3pm``, ``12:50am``, ``3:42 PM``) is the next such time
after ``now`` (within a few minutes before it counts too: the agents round down to the minute)
in the zone the text names, else in ``now``'s zone (the machine's local time by default: Codex
prints local time); a date without a time is that day's midnight.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cairn.terms import LIMIT_KINDS, FailureKind

TEXT_LIMIT = 300  # characters of the agent's words a Failure keeps
GRACE = timedelta(minutes=5)  # a clock time this far in the past is the reset just passed

_NOT_A_LIMIT = re.compile(r"context limit|prompt is too long", re.IGNORECASE)
_USAGE = re.compile(
    r"usage limit|(?<!rate )limit reached|hit your (?:[\w'-]+ ){0,3}limit|weekly limit"
    r"|quota exceeded|usage_limit_reached|insufficient_quota|spend_limit_reached|regain access on",
    re.IGNORECASE,
)
_RATE = re.compile(r"rate[_ ]limit|overloaded|too many requests|last status: 429", re.IGNORECASE)
_AUTH = re.compile(
    r"authentication_error|authentication_failed|permission_error|invalid (?:x-)?api[ -]key"
    r"|incorrect api key|unauthori[sz]ed|\bforbidden\b|oauth token has expired|run /login",
    re.IGNORECASE,
)
_STATUS = re.compile(
    r"(?:api error:?|status:?|\bhttp|rejected|error)\s*\(?([45]\d\d)\b|^([45]\d\d)\s*\{",
    re.IGNORECASE,
)
_RATE_STATUSES = (429, 529)
_AUTH_STATUSES = (401, 403)

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_CLOCK = r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<half>[ap])\.?m\b\.?"
_DATE = (
    r"(?P<month>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+"
    r"(?P<day>\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+(?P<year>\d{4})\b)?"
)
_ZONE = r"(?:\s*\((?P<zone>[A-Za-z_]+(?:/[A-Za-z0-9_+-]+)*)\))?"
# "resets 5am", "reset at 3pm (America/Bogota)", "resets Dec 5, 5:02pm (UTC)", "resets Aug 20",
# Codex's "try again at 3:42 PM" and "try again at Mar 10th, 2026 3:39 AM"
_AT = re.compile(
    rf"(?:\breset(?:s)?(?:\s+at)?|try again at)\s+"
    rf"(?:{_DATE})?(?:,?\s+(?:at\s+)?)?(?:{_CLOCK})?{_ZONE}",
    re.IGNORECASE,
)
_EPOCH = re.compile(r"limit reached\|(\d{9,11})\b|\"resets_at\"\s*:\s*(\d{9,11})\b", re.IGNORECASE)
_SECONDS = re.compile(r"\"resets_in_seconds\"\s*:\s*(\d+)")
_IN = re.compile(
    r"try again in\s+((?:\d+\s*(?:days?|hours?|minutes?|seconds?)[\s,]*(?:and\s+)?)+)",
    re.IGNORECASE,
)
_SPAN = re.compile(r"(\d+)\s*(day|hour|minute|second)", re.IGNORECASE)
_REGAIN = re.compile(
    r"regain access on (\d{4})-(\d{2})-(\d{2})(?: at (\d{1,2}):(\d{2}))?(?: (UTC))?",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Failure:
    """How a dispatch failed: ``kind``, the agent's own words (``text``, one line), the HTTP
    status when known, and for a limit the time it resets (aware, UTC) when the agent said."""

    kind: FailureKind
    text: str = ""
    status: int | None = None
    resets_at: datetime | None = None

    @property
    def limit(self) -> bool:
        """Whether ``agent.on_limit`` applies: a rate or usage limit."""
        return self.kind in LIMIT_KINDS


def classify(
    text: str | None,
    *,
    status: int | None = None,
    resets_at: datetime | None = None,
    now: datetime | None = None,
) -> Failure:
    """What a failure whose error text is ``text`` (and HTTP ``status``, a known reset time)
    was. ``status`` defaults to the one the text names (``API Error: 500``, ``Request rejected
    (429)``, ``unexpected status 401``). ``now`` (default: the machine's local time) anchors
    reset times the text gives without a date, in its zone when the text names none."""
    lines = [" ".join(line.split()) for line in (text or "").splitlines() if line.strip()]
    words = _plain(" ".join(lines))
    status = status if status is not None else _status(words)

    def failure(kind: FailureKind, pattern: re.Pattern[str] | None, reset: bool = False) -> Failure:
        said = next((x for x in reversed(lines) if pattern and pattern.search(_plain(x))), None)
        one = said or (lines[-1] if lines else "")
        at = (resets_at or _reset(words, now)) if reset else None
        return Failure(kind, one[:TEXT_LIMIT], status, at.astimezone(UTC) if at else None)

    if _NOT_A_LIMIT.search(words):
        return failure("error", _NOT_A_LIMIT)
    if _USAGE.search(words):
        return failure("usage_limit", _USAGE, reset=True)
    if status == 429 and resets_at is not None:  # the plan's window: it said when it reopens
        return failure("usage_limit", None, reset=True)
    if status in _RATE_STATUSES:
        return failure("rate_limit", _RATE, reset=True)
    if status in _AUTH_STATUSES:
        return failure("auth", _AUTH)
    if _RATE.search(words):
        return failure("rate_limit", _RATE, reset=True)
    if _AUTH.search(words):
        return failure("auth", _AUTH)
    return failure("error", None)


def _plain(text: str) -> str:
    """``text`` with typographic apostrophes made plain (Codex writes ``You’ve``)."""
    return text.replace("\u2019", "'")


def _status(words: str) -> int | None:
    found = _STATUS.search(words)
    return int(found.group(1) or found.group(2)) if found else None


def _reset(words: str, now: datetime | None) -> datetime | None:
    """When the limit the text describes resets, if it says."""
    now = now if now is not None and now.tzinfo is not None else datetime.now().astimezone()
    if found := _EPOCH.search(words):
        return datetime.fromtimestamp(int(found.group(1) or found.group(2)), UTC)
    if found := _SECONDS.search(words):
        return now + timedelta(seconds=int(found.group(1)))
    if found := _REGAIN.search(words):
        year, month, day, hour, minute = (int(g or 0) for g in found.groups()[:5])
        return datetime(year, month, day, hour, minute, tzinfo=UTC if found.group(6) else None)
    if found := _IN.search(words):
        spans = {unit.lower(): int(n) for n, unit in _SPAN.findall(found.group(1))}
        return now + timedelta(**{f"{unit}s": n for unit, n in spans.items()})
    for found in _AT.finditer(words):
        if found.group("month") or found.group("hour"):
            return _next(found, now)
    return None


def _next(found: re.Match[str], now: datetime) -> datetime | None:
    """The time a ``resets …`` / ``try again at …`` phrase names: the next one after ``now``."""
    zone = now.tzinfo
    if found.group("zone"):
        with contextlib.suppress(ZoneInfoNotFoundError, ValueError):
            zone = ZoneInfo(found.group("zone"))
    here = now.astimezone(zone)
    hour = minute = 0
    if found.group("hour"):
        hour = int(found.group("hour")) % 12 + (12 if found.group("half").lower() == "p" else 0)
        minute = int(found.group("minute") or 0)
        if minute > 59:
            return None
    try:
        at = here.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if found.group("month"):
            month = _MONTHS.index(found.group("month")[:3].lower()) + 1
            year = int(found.group("year") or here.year)
            at = at.replace(year=year, month=month, day=int(found.group("day")))
            past = at < here - GRACE if found.group("hour") else at.date() < here.date()
            if not found.group("year") and past:
                at = at.replace(year=year + 1)
        elif at < here - GRACE:
            at = at + timedelta(days=1)
    except ValueError:  # a day the month does not have
        return None
    return at


_WORDS: dict[FailureKind, str] = {
    "rate_limit": "rate limit",
    "usage_limit": "usage limit",
    "auth": "authentication error",
    "error": "error",
}


def describe(failure: Failure, agent: str, now: datetime | None = None) -> str:
    """The one line that names a failure: ``usage limit of claude-code; resets 14:00 UTC``."""
    line = f"{_WORDS[failure.kind]} of {agent}"
    if failure.limit:
        line += f"; resets {when(failure.resets_at, now)}"
    return line


def when(at: datetime | None, now: datetime | None = None) -> str:
    """A reset time as people read it: ``14:00 UTC`` today, ``Dec 4 14:00 UTC`` later,
    ``unknown`` when the agent did not say."""
    if at is None:
        return "at an unknown time"
    at = at.astimezone(UTC)
    today = (now or datetime.now(UTC)).astimezone(UTC).date()
    return at.strftime("%H:%M UTC" if at.date() == today else "%b %-d %H:%M UTC")

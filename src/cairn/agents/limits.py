"""Knowing a limit when an agent hits one: an agent's failed dispatch classified as a rate
limit, a usage limit (with its reset time when the agent says it), refused credentials, or
another error.

The adapters call ``classify`` with what they know of a failure (the agent's error text, the
API's HTTP status, a reset time the stream gave) and put the ``Failure`` in the dispatch's
``Result``; the orchestrator decides what a limit means (``agent.on_limit``). ``describe`` is
the one line every place shows (the cutoff, the summary's status, catch-up, ``--json``,
notifications): ``usage limit of claude-code; resets 14:00 UTC``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from cairn.terms import LIMIT_KINDS, FailureKind

_RATE = re.compile(r"\b429\b|\b529\b|rate[_ ]limit|overloaded|too many requests", re.IGNORECASE)
_USAGE = re.compile(
    r"usage limit|limit reached|hit your session limit|hit your usage limit|weekly limit"
    r"|quota exceeded|usage_limit_reached",
    re.IGNORECASE,
)
_AUTH = re.compile(
    r"\b401\b|\b403\b|authentication_error|permission_error|invalid api key|unauthori[sz]ed",
    re.IGNORECASE,
)
_NOT_A_LIMIT = re.compile(r"context limit|prompt is too long", re.IGNORECASE)


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
    was. ``now`` anchors reset times the text gives without a date."""
    words = " ".join((text or "").split())
    if _NOT_A_LIMIT.search(words):
        return Failure("error", words, status)
    if _USAGE.search(words):
        return Failure("usage_limit", words, status, resets_at)
    if status in (429, 529) or _RATE.search(words):
        return Failure("rate_limit", words, status, resets_at)
    if status in (401, 403) or _AUTH.search(words):
        return Failure("auth", words, status)
    return Failure("error", words, status)


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

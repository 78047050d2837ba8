"""Which agents are at a limit now: ``<state root>/limits/<agent>.json``, one file per agent
(a named agent's name, or its kind), written when a run's dispatch hits a usage or rate limit.

Every run and the fleet's supervisor of the repository read them: a run starts on, fails back
to and moves to an agent only while it is not held here, and the supervisor starts no ticket
whose agents are all held (its state ``waiting``, until the earliest reset). A limit whose
reset the agent did not say holds for ``UNKNOWN_HOLD`` seconds after it was seen; then the
agent is tried again. A file that cannot be read holds nothing (a warning says so where it is
read).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

import msgspec

from cairn.errors import CairnError
from cairn.state.layout import Layout
from cairn.terms import LimitKind
from cairn.util import durable

UNKNOWN_HOLD: dict[str, float] = {"usage_limit": 3600.0, "rate_limit": 60.0}
READ_LIMIT = 64 * 1024


class Held(msgspec.Struct, kw_only=True, frozen=True):
    """An agent at a limit: until when (``resets_at``; ``reset_known`` False: cairn's guess),
    what the agent said, and the run that saw it."""

    agent: str
    kind: str  # the agent kind (claude-code, codex, …)
    limit: LimitKind
    resets_at: datetime
    reset_known: bool
    seen_at: datetime
    text: str = ""
    ticket: str | None = None
    run: str | None = None


def directory(layout: Layout) -> Path:
    return layout.root / "limits"


def note(layout: Layout, held: Held) -> None:
    """Record that ``held.agent`` is at a limit (the latest word wins)."""
    where = directory(layout)
    durable.ensure_dir(where)
    durable.atomic_write(where / f"{held.agent}.json", msgspec.json.encode(held))


def hold_until(limit: LimitKind, resets_at: datetime | None, seen: datetime) -> datetime:
    """When a limit seen at ``seen`` ends: its reset, or cairn's guess when none was said."""
    return resets_at or seen + timedelta(seconds=UNKNOWN_HOLD[limit])


def read(layout: Layout, agent: str, warnings: list[str] | None = None) -> Held | None:
    """What is recorded for ``agent`` (held or not any more), None when nothing is."""
    path = directory(layout) / f"{agent}.json"
    try:
        data = durable.read_state_file(path, "agent limit", READ_LIMIT)
        return None if data is None else msgspec.json.decode(data, type=Held)
    except (msgspec.DecodeError, msgspec.ValidationError, CairnError) as exc:
        if warnings is not None:
            warnings.append(f"{path} could not be read ({exc}); remove it")
        return None


def holding(
    layout: Layout, agent: str, now: datetime, warnings: list[str] | None = None
) -> Held | None:
    """The limit ``agent`` is at now, None when it is free."""
    held = read(layout, agent, warnings)
    return held if held is not None and held.resets_at > now else None


def all_held(layout: Layout, now: datetime, warnings: list[str] | None = None) -> list[Held]:
    """Every agent at a limit now, the soonest reset first (a file that cannot be read: a line
    in ``warnings``)."""
    where = directory(layout)
    try:
        names = sorted(n[:-5] for n in os.listdir(where) if n.endswith(".json"))
    except FileNotFoundError:
        return []
    found = [h for n in names if (h := holding(layout, n, now, warnings)) is not None]
    return sorted(found, key=lambda h: h.resets_at)


def release(layout: Layout, agent: str) -> bool:
    """Forget ``agent``'s limit (it answered again); whether one was recorded."""
    return durable.remove(directory(layout) / f"{agent}.json")

"""What the fleet's tracker refused: ``<state root>/fleet/refused.json``.

A queue entry or an issue that cannot become a ticket (a name that is not a ticket id, a plan
that does not parse, two plans naming one ticket, an issue without a plan) is refused with one
line saying why and the fix. The supervisor's poll writes the listing (atomically, and only when
it changed); ``cairn fleet status`` and the dashboard read it, with or without a supervisor
running. ``Reporter`` tells which refusals are new or changed since the last poll, so each is
said once per change, not at every poll.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import msgspec
from msgspec import Struct

from cairn.errors import BadInput
from cairn.state.layout import Layout
from cairn.state.owner import with_offsets
from cairn.util import clock, durable

REFUSED = "refused"  # the state of a refused entry's row in `cairn fleet status` and the API
EVENT = "ticket_refused"  # the `--json` event, on both engines
NAME = "refused.json"
READ_LIMIT = 4 * 1024 * 1024
WHAT = "refused listing"


class Rejected(NamedTuple):
    """An entry a tracker's poll could not turn into a ticket (``Tracker.rejected``)."""

    plan: str  # the entry: its queue file relative to the repository, or the URL
    reason: str  # one line: why, and the fix
    ticket: str | None = None  # the ticket it would be, when it names a valid id
    version: str = ""  # changes when the entry changes (a file's mtime and size, a body's hash)


class Refusal(Struct, frozen=True, kw_only=True):
    plan: str
    ticket: str | None = None
    reason: str
    version: str = ""
    since: datetime  # when it was first refused in this form

    def __post_init__(self) -> None:
        with_offsets(self, "since")


class Listing(Struct, frozen=True, kw_only=True):
    refused: list[Refusal]
    updated: datetime

    def __post_init__(self) -> None:
        with_offsets(self, "updated")


def path_of(layout: Layout) -> Path:
    return layout.fleet_dir / NAME


def read(layout: Layout, warnings: list[str] | None = None) -> list[Refusal]:
    """The refusals of the last poll; none when there was no poll. A listing that cannot be
    read is a warning (appended to ``warnings``), never an error: it is rewritten at the next
    poll."""
    path = layout.root / "fleet" / NAME
    try:
        path = path_of(layout)
        data = durable.read_state_file(path, WHAT, READ_LIMIT)
        if data is None:
            return []
        raw = json.loads(durable.decode_text(data, path, WHAT))
        return msgspec.convert(raw, Listing, strict=False).refused
    except (OSError, BadInput) as exc:
        problem = str(exc) if isinstance(exc, BadInput) else f"{path}: {exc.strerror}"
    except ValueError as exc:  # not JSON, or not in shape
        from cairn.util import invalid

        key = invalid.problem(exc)[0] if isinstance(exc, msgspec.ValidationError) else ""
        problem = f"{WHAT} {path} is not in shape{f' ({key})' if key else ''}"
    if warnings is not None:
        warnings.append(f"{problem}; the next poll of `cairn fleet start` rewrites it")
    return []


def write(layout: Layout, refused: list[Refusal]) -> None:
    listing = Listing(refused=refused, updated=clock.now())
    path = path_of(layout)
    durable.ensure_dir(path.parent)
    text = msgspec.json.format(msgspec.json.encode(listing), indent=2).decode()
    durable.atomic_write(path, text + "\n")


class Reporter:
    """The refusals of each poll: the ones to say (new, or changed since this process last
    said them), and the listing (``save``)."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.known: list[Refusal] | None = None  # what the listing holds (read at first use)
        self.said: dict[str, tuple[str, str]] = {}  # plan → (version, reason) said
        self.current: list[Refusal] = []  # the last poll's

    def poll(self, found: Iterable[Rejected]) -> list[Refusal]:
        """Record this poll's refusals; those to say now, in the order found."""
        if self.known is None:
            self.known = read(self.layout)
        before = {r.plan: r for r in self.known}
        now = clock.now()
        current: list[Refusal] = []
        fresh: list[Refusal] = []
        for item in found:
            if any(r.plan == item.plan for r in current):
                continue  # one row per entry
            old = before.get(item.plan)
            same = old is not None and (old.version, old.reason) == (item.version, item.reason)
            refusal = Refusal(
                plan=item.plan,
                ticket=item.ticket,
                reason=item.reason,
                version=item.version,
                since=old.since if old is not None and same else now,
            )
            current.append(refusal)
            if self.said.get(item.plan) != (item.version, item.reason):
                self.said[item.plan] = (item.version, item.reason)
                fresh.append(refusal)
        for gone in set(self.said) - {r.plan for r in current}:
            del self.said[gone]  # refused again later: said again
        self.current = current
        return fresh

    def save(self) -> None:
        """Write the listing when the last poll changed it."""
        if self.current != self.known:
            write(self.layout, self.current)
            self.known = self.current

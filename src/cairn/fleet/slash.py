"""``/cairn`` commands in a tracker's comments: a person answers or steers a ticket from its issue.

A comment on a fleet ticket's issue whose first line is ``/cairn answer <text>`` (the lines
after it are part of the answer), ``/cairn retry`` or ``/cairn stop`` is carried out as
``cairn answer``, ``cairn fleet retry`` and ``cairn fleet stop`` would carry it out
(``cairn.fleet.steer.carry_out``), and the issue gets a reply saying what was done or why
not. Only people the tracker says may write to the repository (GitHub's
``author_association`` ``OWNER``, ``MEMBER`` or ``COLLABORATOR``) are obeyed; anyone else's
command gets a reply saying so. Each comment is read once: the id of the last one read of
each ticket is kept (``<state root>/fleet/<tracker>/commands.json``), a ticket's comments are
first read from the moment its record last changed (an old command is never replayed), and
the reply's key is the comment's, so it is posted once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from cairn.errors import BadInput
from cairn.fleet import fleetstate
from cairn.fleet.trackers.base import Command
from cairn.state.layout import Layout
from cairn.util import durable

WRITERS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
# The states whose issue is read for commands: a person may need to act (or stop a run).
WATCHED = frozenset(
    {"running", "retrying", "waiting", "budget", "paused", "interrupted", "stopped"}
    | {"needs_input", "needs_review", "failed"}
)
_COMMAND = re.compile(r"\A\s*/cairn[ \t]+(\w+)[ \t]*(.*)\Z", re.DOTALL)
READ_LIMIT = 1024 * 1024


def parse(body: str) -> tuple[str, str] | None:
    """``(verb, text)`` of a comment that is a ``/cairn`` command (any verb), else None."""
    found = _COMMAND.match(body.replace("\r\n", "\n"))
    if found is None:
        return None
    return found.group(1).lower(), found.group(2).strip()


class Seen:
    """The last comment read of each ticket, kept on disk."""

    def __init__(self, layout: Layout, tracker: str) -> None:
        self.path = layout.fleet_dir / tracker / "commands.json"
        self._seen: dict[str, int] | None = None

    def last(self, ticket: str) -> int | None:
        return self._load().get(ticket)

    def mark(self, ticket: str, comment: int) -> None:
        seen = self._load()
        if seen.get(ticket) != comment:
            seen[ticket] = comment
            durable.ensure_dir(self.path.parent)
            durable.atomic_write(self.path, json.dumps(seen, indent=2, sort_keys=True) + "\n")

    def _load(self) -> dict[str, int]:
        if self._seen is None:
            self._seen = {}
            try:
                data = durable.read_state_file(self.path, "commands record", READ_LIMIT)
                found = json.loads(data) if data is not None else {}
                if isinstance(found, dict):
                    self._seen = {k: v for k, v in found.items() if type(v) is int}
            except (OSError, ValueError, BadInput):
                pass  # read again from the records' times: nothing is replayed
        return self._seen


def read(
    layout: Layout,
    seen: Seen,
    listed: Callable[[str], list[dict[str, Any]]],
    prefix: str,
) -> list[Command]:
    """The new ``/cairn`` commands on the issues of the fleet tickets in a ``WATCHED`` state
    whose ids start with ``prefix``; ``listed(ticket)``: the issue's comments, oldest first."""
    found: list[Command] = []
    for ticket, record in sorted(fleetstate.by_ticket(layout, []).items()):
        if not ticket.startswith(prefix) or record.state not in WATCHED:
            continue
        last = seen.last(ticket)
        newest = last
        for comment in listed(ticket):
            ident = comment.get("id")
            if type(ident) is not int or (last is not None and ident <= last):
                continue
            newest = max(newest or 0, ident)
            if last is None and not _after(comment, record.updated):
                continue
            said = parse(str(comment.get("body") or ""))
            if said is None:
                continue
            user = comment.get("user")
            who = str(user.get("login")) if isinstance(user, dict) else "someone"
            allowed = comment.get("author_association") in WRITERS
            found.append(Command(ticket, said[0], said[1], who, str(ident), allowed))
        if newest is not None:
            seen.mark(ticket, newest)
    return found


def _after(comment: dict[str, Any], since: datetime) -> bool:
    try:
        made = datetime.fromisoformat(str(comment.get("created_at")).replace("Z", "+00:00"))
    except ValueError:
        return False
    return made >= since.replace(microsecond=0)  # GitHub's times are in whole seconds

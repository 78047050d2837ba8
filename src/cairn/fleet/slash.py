"""``/cairn`` commands in a tracker's comments: a person answers or steers a ticket from its issue.

A comment on a fleet ticket's issue whose first line is ``/cairn answer <text>`` (the lines
after it are part of the answer), ``/cairn retry`` or ``/cairn stop`` is carried out as
``cairn answer``, ``cairn fleet retry`` and ``cairn fleet stop`` would carry it out
(``cairn.fleet.steer.carry_out``), and the issue gets a reply saying what was done or why
not. Only people the tracker says may write to the repository (GitHub's
``author_association`` ``OWNER``, ``MEMBER`` or ``COLLABORATOR``; on Linear, a person of the
workspace, not an integration) are obeyed; anyone else's command gets a reply saying so. Each
comment is read once: the ids read of each ticket's comments are kept
(``<state root>/fleet/<tracker>/commands.json``); the first time a ticket's comments are read,
only those after cairn's last comment there and after its record last changed count (an old
command is never replayed); and the reply's key is the comment's, so it is posted once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any, NamedTuple

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


class Said(NamedTuple):
    """A comment on an issue, as a tracker reads it."""

    id: str
    body: str
    who: str  # the author's name
    allowed: bool  # whether the author may steer the fleet (write access)
    created: str | None  # ISO time


def from_github(comment: dict[str, Any]) -> Said:
    """A GitHub issue comment (REST): its author may steer when GitHub says they can write."""
    user = comment.get("user")
    return Said(
        str(comment.get("id")),
        str(comment.get("body") or ""),
        str(user.get("login")) if isinstance(user, dict) else "someone",
        comment.get("author_association") in WRITERS,
        comment.get("created_at"),
    )


def from_linear(comment: dict[str, Any]) -> Said:
    """A Linear comment (GraphQL): its author is a member of the workspace the API key reads,
    who may steer (Linear gives a comment no repository permission)."""
    user = comment.get("user")
    name = user.get("name") if isinstance(user, dict) else None
    return Said(
        str(comment.get("id")),
        str(comment.get("body") or ""),
        str(name or "someone"),
        isinstance(user, dict),  # a person (not an integration) of the workspace
        comment.get("createdAt"),
    )


KEPT = 500  # comment ids kept per ticket: more than any issue's comments between two polls


class Seen:
    """The comments already read of each ticket (their ids, the latest ``KEPT``), on disk."""

    def __init__(self, layout: Layout, tracker: str) -> None:
        self.path = layout.fleet_dir / tracker / "commands.json"
        self._seen: dict[str, list[str]] | None = None

    def ids(self, ticket: str) -> list[str] | None:
        """The ids read of ``ticket``'s comments; None when they were never read."""
        return self._load().get(ticket)

    def mark(self, ticket: str, ids: list[str]) -> None:
        seen = self._load()
        if seen.get(ticket) != ids[-KEPT:]:
            seen[ticket] = ids[-KEPT:]
            durable.ensure_dir(self.path.parent)
            durable.atomic_write(self.path, json.dumps(seen, indent=2, sort_keys=True) + "\n")

    def _load(self) -> dict[str, list[str]]:
        if self._seen is None:
            self._seen = {}
            try:
                data = durable.read_state_file(self.path, "commands record", READ_LIMIT)
                found = json.loads(data) if data is not None else {}
                if isinstance(found, dict):
                    self._seen = {
                        k: [str(i) for i in v] for k, v in found.items() if isinstance(v, list)
                    }
            except (OSError, ValueError, BadInput):
                pass  # read again from the records' times: nothing is replayed
        return self._seen


def read(
    layout: Layout,
    seen: Seen,
    listed: Callable[[str], list[Said]],
    prefix: str,
) -> list[Command]:
    """The new ``/cairn`` commands on the issues of the fleet tickets in a ``WATCHED`` state
    whose ids start with ``prefix``; ``listed(ticket)``: the issue's comments, oldest first."""
    found: list[Command] = []
    for ticket, record in sorted(fleetstate.by_ticket(layout, []).items()):
        if not ticket.startswith(prefix) or record.state not in WATCHED:
            continue
        known = seen.ids(ticket)
        read_now = list(known or [])
        comments = listed(ticket)
        # read for the first time: only what was said after cairn's last word on the issue and
        # after the ticket came to where it is (an older command is never replayed)
        ours = [i for i, c in enumerate(comments) if "<!-- cairn:" in c.body]
        first_new = ours[-1] + 1 if ours else 0
        for index, comment in enumerate(comments):
            if comment.id in read_now:
                continue
            read_now.append(comment.id)
            if known is None and (index < first_new or not _after(comment.created, record.updated)):
                continue
            said = parse(comment.body)
            if said is not None:
                verb, text = said
                found.append(Command(ticket, verb, text, comment.who, comment.id, comment.allowed))
        if read_now != known:
            seen.mark(ticket, read_now)
    return found


def _after(created: str | None, since: datetime) -> bool:
    try:
        made = datetime.fromisoformat(str(created).replace("Z", "+00:00"))
    except ValueError:
        return False
    return made >= since.replace(microsecond=0)  # GitHub's times are in whole seconds

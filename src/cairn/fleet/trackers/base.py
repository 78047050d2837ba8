"""The tracker interface: where the fleet's tickets come from, and where it reports on them.

A tracker lists the tickets that could run, lets one supervisor claim one, and hears about every
transition and the end of each. The ``dir`` tracker reads plan files from a directory; trackers
of issue systems implement the same four methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import NamedTuple

from cairn.fleet.refusals import Rejected

__all__ = ["Candidate", "Command", "Rejected", "Tracker"]


class Candidate(NamedTuple):
    ticket: str  # the plan's `ticket:` front matter, or the file stem (validated by cairn.tickets)
    plan: Path  # absolute path of the plan file


class Command(NamedTuple):
    """A ``/cairn`` command a person wrote on a ticket's issue (``cairn.fleet.slash``)."""

    ticket: str
    verb: str
    text: str  # the answer (empty for retry and stop)
    who: str  # the commenter's login
    ref: str  # the comment's id: its reply's key
    allowed: bool  # whether the commenter may write to the repository


class Tracker(ABC):
    """What the supervisor needs from a source of tickets."""

    # True for a tracker that pushes a finished ticket's branch itself (before it opens a pull
    # request); the supervisor then leaves ``fleet.push`` to it.
    pushes_branch: bool = False

    def __init__(self) -> None:
        # Entries the last ``candidates()`` could not turn into tickets (bad id, duplicate id,
        # unreadable plan, an issue without a plan): the supervisor reports each once per
        # change and keeps them for `cairn fleet status`; they never stop the other tickets.
        self.rejected: list[Rejected] = []
        # Why the last ``candidates()`` could not read the tracker (None: it could); the list
        # it returned is then the last good one.
        self.trouble: str | None = None
        # What the tracker skipped or set right since ``said()`` was last asked (a poll that
        # failed, a message sent again later, a file set aside): its owner says them.
        self.warnings: list[str] = []

    def said(self) -> list[str]:
        """The warnings since the last call, taken: the owner says them (``ticket_warning``)."""
        taken, self.warnings = self.warnings, []
        return taken

    @abstractmethod
    def candidates(self) -> list[Candidate]:
        """The tickets that are not finished, in a stable order; when each may start (backoff,
        concurrency) is the supervisor's decision."""

    @abstractmethod
    def claim(self, ticket: str) -> bool:
        """True if this supervisor may run ``ticket`` now."""

    @abstractmethod
    def transition(self, ticket: str, state: str, detail: str | None = None) -> None:
        """Record that ``ticket`` is now in ``state`` (a fleet state)."""

    @abstractmethod
    def finish(self, ticket: str, state: str) -> None:
        """Record that ``ticket`` is done for good: completed, needs_review, interrupted (its
        attempts spent), needs_input or failed. It is not listed again."""

    def commands(self) -> list[Command]:
        """The new ``/cairn`` commands people wrote on the tickets' issues (``cairn.fleet.
        slash``); none for a tracker without comments."""
        return []

    def reply(self, ticket: str, text: str, key: str) -> None:
        """Answer a command on ``ticket``'s issue (``key``: the message's idempotency key);
        only a tracker whose ``commands`` finds any is asked."""
        raise NotImplementedError(f"{type(self).__name__} has no comments to reply in")

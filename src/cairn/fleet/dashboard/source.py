"""Where the dashboard's rows come from when they are not this repository's fleet files: the
interface a source implements (the temporal engine's is ``cairn.scale.dashsource``, handed in
by the command line, so ``cairn.fleet`` never imports temporalio)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple, Protocol

from cairn.git import Git
from cairn.terms import Asker, FleetAction


class View(NamedTuple):
    """What a ticket page diffs and reads: a repository holding the ticket's refs, the base
    its branch is compared with (``base...branch``) and what the page calls it, the branch and
    snapshot refs there (None: not there), and the run directory with the change summary and
    the journal (None: none readable). The embedded fleet's is this repository; the temporal
    engine's a scratch repository of the shared remote's refs."""

    git: Git
    base: str
    base_name: str
    branch: str | None
    snapshot: str | None
    run_dir: Path | None


class Source(Protocol):
    def rows(self) -> tuple[list[dict[str, Any]], list[str]]:
        """Every ticket's row (``cairn fleet status --json``'s shape) and warnings."""
        ...

    def row(self, ticket: str) -> dict[str, Any] | None: ...

    def refresh(self) -> bool:
        """Read again at the next request; whether a read was due already."""
        ...

    def supervisor(self) -> dict[str, Any]:
        """The page's ``supervisor`` object: ``running`` enables its refresh button."""
        ...

    def view(self, ticket: str, row: dict[str, Any]) -> View | None: ...

    def actions(self, ticket: str, row: dict[str, Any]) -> dict[str, str | None]:
        """Each action: None when it changes the ticket, else why it does not."""
        ...

    def control(self, ticket: str, action: FleetAction, by: Asker) -> dict[str, Any]:
        """Ask ``action`` of ``ticket`` (``Dashboard.control``'s answer); raises
        ``UnknownTicket`` or ``NotApplicable``, nothing changed."""
        ...

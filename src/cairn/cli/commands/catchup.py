"""``cairn catchup``: where the last run of a ticket got to, and the next command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from cairn.cli.commands.options import Json, Workspace
from cairn.cli.handlers import catchup as handler
from cairn.cli.output import guarded


@guarded
def catchup(
    ticket: Annotated[
        str | None, typer.Argument(help="Ticket id (default: the branch name).")
    ] = None,
    json: Json = False,
    format_: Annotated[
        Literal["text", "context"],
        typer.Option("--format", help="text, or context: a paragraph for an agent."),
    ] = "text",
    clear_stale: Annotated[
        bool, typer.Option("--clear-stale", help="Remove the ticket's marker if it is stale.")
    ] = False,
    workspace: Workspace = Path("."),
) -> None:
    """Report a ticket's state: marker, summary, snapshot, journal, then artifacts."""
    handler.catchup(**locals())

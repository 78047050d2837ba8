"""``cairn logs``: print a run's transcripts (each dispatch's agent events) readably."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cairn.cli.commands.options import Workspace
from cairn.cli.handlers import logs as handler
from cairn.cli.output import guarded


@guarded
def logs(
    ticket: Annotated[
        str | None, typer.Argument(help="Ticket id (default: the branch name).")
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Tail the live run's transcript until it ends.")
    ] = False,
    dispatch: Annotated[
        int | None,
        typer.Option("--dispatch", min=1, help="Only dispatch N (the NN of its transcript)."),
    ] = None,
    json: Annotated[
        bool, typer.Option("--json", help="Print the raw events as JSON lines.")
    ] = False,
    workspace: Workspace = Path("."),
) -> None:
    """Print the latest run's transcripts: turns, tool calls, messages."""
    handler.logs(**locals())

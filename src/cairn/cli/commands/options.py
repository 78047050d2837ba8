"""Options shared by several commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Workspace = Annotated[
    Path,
    typer.Option("-C", "--workspace", help="Run in this directory instead of the current one."),
]
Json = Annotated[bool, typer.Option("--json", help="Print JSON.")]
TicketOpt = Annotated[
    str | None, typer.Option("--ticket", "-t", help="Ticket id (default: the branch name).")
]

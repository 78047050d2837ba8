"""``cairn demo``: a whole interrupted-and-resumed run with the scripted agent (no API key)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from cairn.cli.output import console, guarded


@guarded
def demo(
    directory: Annotated[
        Path | None, typer.Option("--dir", help="An empty directory to use (default: a new one).")
    ] = None,
) -> None:
    """Run a 4-task plan, get cut off at the turn cap, catch up, resume, review and finish."""
    from cairn.cli.display import Display
    from cairn.run.demo import tour

    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="cairn-demo-"))
    code = tour(directory, console.print, Display("plain"))
    if code:
        raise typer.Exit(code)

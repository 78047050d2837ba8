"""``cairn worker``: run ticket segments for a fleet on Temporal (docs/scale-out.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cairn.cli.commands.options import Json, Workspace
from cairn.cli.output import guarded


@guarded
def worker(
    engine: Annotated[
        str | None, typer.Option("--engine", help="temporal (default: fleet.engine).")
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", min=1, help="Segments at once (default: fleet.concurrency)."),
    ] = None,
    workspace_root: Annotated[
        Path | None,
        typer.Option(
            "--workspace-root",
            help="Where the clone and worktrees go (default: <repo>.cairn-worker beside it).",
        ),
    ] = None,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Run ticket segments from the Temporal task queue until SIGINT or SIGTERM."""
    from cairn.cli.handlers import scale

    scale.worker(engine, concurrency, workspace_root, json, workspace)

"""TEMPORARY: ``cairn fleet status`` until the supervisor's ``cli/commands/fleet.py`` (which
wires the same handler as ``fleet status``) is merged; the integrator then removes this module
and its line in ``cli/app.py``."""

from __future__ import annotations

from pathlib import Path

import typer

from cairn.cli.commands.options import Json, Workspace
from cairn.cli.handlers import fleet_status as handler
from cairn.cli.output import guarded

app = typer.Typer(help="Run many tickets at once, each in its own worktree.", no_args_is_help=True)


@app.command("status")
@guarded
def status(json: Json = False, workspace: Workspace = Path(".")) -> None:
    """One row per fleet ticket: state, phase, task, attempt, turns, snapshot, worktree."""
    handler.status(**locals())

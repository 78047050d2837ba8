"""``cairn config show``: the effective configuration and where each value came from."""

from __future__ import annotations

import json as jsonlib
from pathlib import Path

import typer

from cairn.cli.commands.options import Json, Workspace
from cairn.cli.output import console, guarded

app = typer.Typer(help="The effective configuration.", no_args_is_help=True)


@app.command("show")
@guarded
def show(json: Json = False, workspace: Workspace = Path(".")) -> None:
    """Print every key, its value, and the file it came from (or default)."""
    from cairn.config import effective, load
    from cairn.git import Repo

    config = load(Repo.discover(workspace).toplevel)
    rows = effective(config)
    if json:
        payload = [{"key": k, "value": v, "source": s} for k, v, s in rows]
        typer.echo(jsonlib.dumps(payload, indent=2, default=str))
        return
    width = max(len(k) for k, _, _ in rows)
    for key, value, source in rows:
        shown = jsonlib.dumps(value, default=str)
        console.print(f"{key.ljust(width)}  {shown}  ({source})")

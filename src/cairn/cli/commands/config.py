"""``cairn config show``: the effective configuration and where each value came from."""

from __future__ import annotations

import json as jsonlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from cairn.cli.commands.options import Json, Workspace
from cairn.cli.output import console, guarded

if TYPE_CHECKING:
    from cairn.config import Config

app = typer.Typer(help="The effective configuration.", no_args_is_help=True)


@app.command("show")
@guarded
def show(json: Json = False, workspace: Workspace = Path(".")) -> None:
    """Print every key, its value, and the file it came from (or default)."""
    from cairn.config import load
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


def effective(config: Config) -> list[tuple[str, Any, str]]:
    """Every key with its value and where the value came from (the file, or ``default``)."""
    source = str(config.source) if config.source else "default"
    rows: list[tuple[str, Any, str]] = []

    from msgspec import Struct

    def walk(node: Struct, prefix: str, given: dict[str, Any] | None) -> None:
        for name in node.__struct_fields__:
            value = getattr(node, name)
            key = f"{prefix}{name}"
            here = given is not None and name in given
            table = given.get(name) if given is not None and here else None
            table = table if isinstance(table, dict) else None
            if isinstance(value, Struct):
                walk(value, f"{key}.", table)
            elif (
                isinstance(value, dict)
                and value
                and all(isinstance(v, Struct) for v in value.values())
            ):
                for sub, item in sorted(value.items()):
                    inner = table.get(sub) if table is not None else None
                    walk(item, f"{key}.{sub}.", inner if isinstance(inner, dict) else None)
            else:
                rows.append((key, value, source if here else "default"))

    walk(config, "", config.given if config.source is not None else None)
    return rows

"""The ``cairn`` command: parse, call one function, print. No logic lives here."""

from __future__ import annotations

from typing import Annotated

import typer

from cairn import __version__
from cairn.commands import demo, wip

app = typer.Typer(
    name="cairn",
    help="Interruption-proof runs for AI coding agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(wip.app, name="wip")
app.command("demo")(demo.demo)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"cairn {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Interruption-proof runs for AI coding agents."""


def main() -> None:
    app()

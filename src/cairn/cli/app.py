"""The ``cairn`` command: parse, call one function, print. No logic lives here."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from cairn import __version__
from cairn.cli.commands import (
    catchup,
    config,
    demo,
    fleet,
    hook_events,
    hooks_install,
    logs,
    mcp,
    progress,
    run,
    status,
    wip,
    worker,
)
from cairn.cli.output import flush_streams, say_error, wants_json
from cairn.errors import ExitCode

app = typer.Typer(
    name="cairn",
    help="Interruption-proof runs for AI coding agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: a flag shows as a flag and a choice as its values (Rich's panels print
    # "<bool>" after every flag), and no Rich is loaded to print it.
    rich_markup_mode=None,
)
# Runs first, then snapshots, then what agents call while they work, then set-up.
app.command("run")(run.run)
app.command("resume")(run.resume)
app.command("catchup")(catchup.catchup)
app.command("status")(status.status)
app.command("logs")(logs.logs)
app.command("demo")(demo.demo)
app.add_typer(fleet.app, name="fleet")
app.command("worker")(worker.worker)
app.add_typer(wip.app, name="wip")
app.add_typer(progress.task_app, name="task")
app.command("finding")(progress.finding)
app.command("gate")(progress.gate)
app.command("ac")(progress.ac)
app.command("defer")(progress.defer)
app.command("mcp")(mcp.mcp)
app.add_typer(config.app, name="config")
app.add_typer(hooks_install.app, name="hooks")
app.add_typer(hook_events.app, name="hook", hidden=True)


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
    """Run the CLI; usage errors become one line, like every other cairn error (or, under
    ``--json``, the same error object)."""
    try:
        code = app(standalone_mode=False)
    except Exception as exc:
        sys.exit(flush_streams(_usage_error(exc, wants_json(sys.argv[1:]))))
    sys.exit(flush_streams(code if isinstance(code, int) else 0))


def _usage_error(exc: Exception, json: bool) -> int:
    """Print a command-line parsing error (Typer's click exceptions, matched by shape)."""
    name = type(exc).__name__
    ctx = getattr(exc, "ctx", None)
    if name == "NoArgsIsHelpError" and ctx is not None:
        typer.echo(ctx.get_help())
        return ExitCode.OK
    if name == "Abort":
        say_error("interrupted", ExitCode.SIGINT, json)
        return ExitCode.SIGINT
    if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
        raise exc
    problem = exc.format_message().rstrip(".").replace("Value error, ", "")
    where = f"; see `{ctx.command_path} --help`" if ctx is not None else ""
    say_error(f"{problem}{where}", int(exc.exit_code), json)
    return int(exc.exit_code)

"""``cairn fleet``: many tickets at once, each in its own worktree (``start``, ``stop``,
``pause``, ``resume``, ``retry``, ``status``, ``prune``, ``dashboard``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cairn.cli.commands.options import Json, Workspace
from cairn.cli.output import guarded
from cairn.terms import FleetAction

Port = Annotated[
    int | None,
    typer.Option("--port", help="Serve the dashboard on this port (0: a free one)."),
]
Host = Annotated[
    str | None,
    typer.Option(
        "--host",
        help="The dashboard's address (default 127.0.0.1); another needs CAIRN_DASHBOARD_TOKEN.",
    ),
]

Engine = Annotated[
    str | None,
    typer.Option("--engine", help="embedded (one machine) or temporal (default: fleet.engine)."),
]

app = typer.Typer(
    help="Run the tickets of a queue, each in its own worktree, with retries.",
    no_args_is_help=True,
)


@app.command("start")
@guarded
def start(
    once: Annotated[
        bool, typer.Option("--once", help="Drain what the queue has now, then exit.")
    ] = False,
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", min=1, help="Tickets at once (default: fleet.concurrency)."),
    ] = None,
    json: Json = False,
    workspace: Workspace = Path("."),
    port: Port = None,
    host: Host = None,
    engine: Engine = None,
) -> None:
    """Supervise the queue in the foreground; --once exits 0 all completed, 1 any needs
    review (or a refused entry beside them), 2 only refused entries, 3 any left interrupted."""
    from cairn.cli.handlers.engines import engine as engine_for

    code = engine_for(engine, workspace).start(once, concurrency, json, workspace, port, host)
    if code:
        raise typer.Exit(code)


Tickets = Annotated[list[str] | None, typer.Argument(help="Tickets to stop (default: all).")]
Wait = Annotated[
    bool, typer.Option("--wait/--no-wait", help="Wait until it is done (at most 60 s).")
]


@app.command("stop")
@guarded
def stop(
    tickets: Tickets = None,
    wait: Wait = True,
    json: Json = False,
    workspace: Workspace = Path("."),
    engine: Engine = None,
) -> None:
    """Stop the named tickets (each snapshotted and ended stopped; the next fleet start starts
    them again), or without tickets the whole fleet: the running supervisor (temporal: every
    running ticket), each ticket snapshotted and left resumable."""
    from cairn.cli.handlers.engines import engine as engine_for

    engine_for(engine, workspace).stop(tickets or [], wait, json, workspace)


@app.command("pause")
@guarded
def pause(
    tickets: Annotated[list[str], typer.Argument(help="Tickets to pause.")],
    wait: Wait = True,
    json: Json = False,
    workspace: Workspace = Path("."),
    engine: Engine = None,
) -> None:
    """Pause tickets: a running one stops with a snapshot (its attempt not counted); none
    starts again until resumed."""
    _control("pause", tickets, wait, json, workspace, engine)


@app.command("resume")
@guarded
def resume(
    tickets: Annotated[list[str], typer.Argument(help="Tickets to resume.")],
    wait: Wait = True,
    json: Json = False,
    workspace: Workspace = Path("."),
    engine: Engine = None,
) -> None:
    """Let paused tickets run again, resumed from where they stopped."""
    _control("resume", tickets, wait, json, workspace, engine)


def _control(
    action: FleetAction,
    tickets: list[str],
    wait: bool,
    json: bool,
    workspace: Path,
    engine: str | None,
) -> None:
    from cairn.cli.handlers.engines import engine as engine_for

    engine_for(engine, workspace).control(action, tickets, wait, json, workspace)


@app.command("retry")
@guarded
def retry(
    tickets: Annotated[list[str], typer.Argument(help="Tickets to retry.")],
    fresh_config: Annotated[
        bool,
        typer.Option(
            "--fresh-config",
            help="Commit the base branch's cairn.toml onto the ticket branch first.",
        ),
    ] = False,
    json: Json = False,
    workspace: Workspace = Path("."),
    engine: Engine = None,
) -> None:
    """Restart failed, interrupted, stopped or needs-input tickets: each resumes its run from
    what is committed (and pushed), never redoing a completed task; their attempts count
    afresh. The run reads the ticket branch's cairn.toml (--fresh-config: the base's)."""
    from cairn.cli.handlers.engines import engine as engine_for

    engine_for(engine, workspace).retry(tickets, fresh_config, json, workspace)


@app.command("status")
@guarded
def status(json: Json = False, workspace: Workspace = Path("."), engine: Engine = None) -> None:
    """One row per fleet ticket: state, phase, task, attempt, snapshot, worktree (temporal:
    read from the ticket workflows, with the worker)."""
    from cairn.cli.handlers import fleet_status

    fleet_status.status(json=json, workspace=workspace, engine=engine)


@app.command("prune")
@guarded
def prune(
    ticket: Annotated[
        str | None, typer.Argument(help="The ticket whose worktree to remove.")
    ] = None,
    all_finished: Annotated[
        bool, typer.Option("--all-finished", help="Every finished ticket's worktree.")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would go.")] = False,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Remove finished tickets' worktrees, never losing work (snapshot first, or refuse)."""
    from cairn.cli.handlers import fleet_prune

    fleet_prune.prune(
        ticket=ticket, all_finished=all_finished, dry_run=dry_run, json=json, workspace=workspace
    )


@app.command("dashboard")
@guarded
def dashboard(
    port: Annotated[
        int, typer.Option("--port", help="The port to serve on (0: a free one).")
    ] = 8765,
    host: Host = None,
    json: Json = False,
    workspace: Workspace = Path("."),
    engine: Engine = None,
) -> None:
    """Serve the fleet's dashboard read-only from the files, without a supervisor (temporal:
    from the ticket workflows)."""
    from cairn.cli.handlers.engines import engine as engine_for

    engine_for(engine, workspace).dashboard(json, workspace, port, host)

"""``cairn fleet``: many tickets at once, each in its own worktree (``start``, ``stop``,
``status``, ``prune``, ``dashboard``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cairn.cli.commands.options import Json, Workspace
from cairn.cli.output import guarded

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
    review, 3 any left interrupted."""
    from cairn.cli.handlers import fleet_run, scale

    if scale.engine_of(engine, workspace) == "temporal":
        if port is not None:
            from cairn.cli.handlers import scale_status

            scale_status.start(once, json, workspace, port, host)
        scale.fleet_start(once, json, workspace)
    if port is not None:
        from cairn.cli.handlers import fleet_dashboard

        code = fleet_dashboard.start(once, concurrency, json, workspace, port, host)
    else:
        code = fleet_run.start(once, concurrency, json, workspace)
    if code:
        raise typer.Exit(code)


@app.command("stop")
@guarded
def stop(
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Wait until the supervisor has exited.")
    ] = True,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Stop the running supervisor: every ticket is snapshotted and left resumable."""
    from cairn.cli.handlers import fleet_run

    fleet_run.stop(wait, json, workspace)


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
    from cairn.cli.handlers import fleet_dashboard, scale

    if scale.engine_of(engine, workspace) == "temporal":
        from cairn.cli.handlers import scale_status

        scale_status.dashboard(json, workspace, port, host)
    fleet_dashboard.dashboard(json, workspace, port, host)

"""``cairn fleet``: many tickets at once, each in its own worktree (``start``, ``stop``,
``pause``, ``resume``, ``retry``, ``status``, ``prune``, ``dashboard``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from cairn.cli.parsing import Parser, integer, json_flag, workspace

if TYPE_CHECKING:
    from cairn.errors import ExitCode
    from cairn.terms import FleetAction


def _host(parser: Parser) -> None:
    parser.add_argument(
        "--host",
        help="The dashboard's address (default 127.0.0.1); another needs CAIRN_DASHBOARD_TOKEN.",
    )


def _engine(parser: Parser) -> None:
    parser.add_argument(
        "--engine", help="embedded (one machine) or temporal (default: fleet.engine)."
    )


def _tickets(parser: Parser, help: str, optional: bool = False) -> None:
    parser.add_argument("tickets", nargs="*" if optional else "+", metavar="TICKET", help=help)


def _wait(parser: Parser) -> None:
    parser.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Wait until it is done (at most 60 s).",
    )


def _common(parser: Parser) -> None:
    json_flag(parser)
    workspace(parser)


def start(parser: Parser) -> ExitCode | int:
    """Supervise the queue in the foreground; --once exits 0 all completed, 1 any needs
    review (or a refused entry beside them), 2 only refused entries, 3 any left interrupted."""
    parser.add_argument(
        "--once", action="store_true", help="Drain what the queue has now, then exit."
    )
    parser.add_argument(
        "--concurrency",
        type=integer(minimum=1),
        metavar="N",
        help="Tickets at once (default: fleet.concurrency).",
    )
    _common(parser)
    parser.add_argument(
        "--port", type=integer(), help="Serve the dashboard on this port (0: a free one)."
    )
    _host(parser)
    _engine(parser)
    a = parser.parse()
    from cairn.cli.handlers.engines import engine

    return engine(a.engine, a.workspace).start(
        a.once, a.concurrency, a.json, a.workspace, a.port, a.host
    )


def stop(parser: Parser) -> ExitCode | None:
    """Stop the named tickets (each snapshotted and ended stopped; the next fleet start starts
    them again), or without tickets the whole fleet: the running supervisor (temporal: every
    running ticket), each ticket snapshotted and left resumable."""
    _tickets(parser, "Tickets to stop (default: all).", optional=True)
    _wait(parser)
    _common(parser)
    _engine(parser)
    a = parser.parse()
    from cairn.cli.handlers.engines import engine

    return engine(a.engine, a.workspace).stop(a.tickets, a.wait, a.json, a.workspace)


def pause(parser: Parser) -> ExitCode | None:
    """Pause tickets: a running one stops with a snapshot (its attempt not counted); none
    starts again until resumed."""
    return _control(parser, "pause", "Tickets to pause.")


def resume(parser: Parser) -> ExitCode | None:
    """Let paused tickets run again, resumed from where they stopped."""
    return _control(parser, "resume", "Tickets to resume.")


def _control(parser: Parser, action: FleetAction, help: str) -> ExitCode | None:
    _tickets(parser, help)
    _wait(parser)
    _common(parser)
    _engine(parser)
    a = parser.parse()
    from cairn.cli.handlers.engines import engine

    return engine(a.engine, a.workspace).control(action, a.tickets, a.wait, a.json, a.workspace)


def retry(parser: Parser) -> ExitCode | None:
    """Restart failed, interrupted, stopped or needs-input tickets: each resumes its run from
    what is committed (and pushed), never redoing a completed task; their attempts count
    afresh. The run reads the ticket branch's cairn.toml (--fresh-config: the base's)."""
    _tickets(parser, "Tickets to retry.")
    parser.add_argument(
        "--fresh-config",
        action="store_true",
        help="Commit the base branch's cairn.toml onto the ticket branch first.",
    )
    _common(parser)
    _engine(parser)
    a = parser.parse()
    from cairn.cli.handlers.engines import engine

    return engine(a.engine, a.workspace).retry(a.tickets, a.fresh_config, a.json, a.workspace)


def status(parser: Parser) -> ExitCode | None:
    """One row per fleet ticket: state, phase, task, attempt, snapshot, worktree (temporal:
    read from the ticket workflows, with the worker)."""
    parser.add_argument(
        "--attention",
        action="store_true",
        help="Only what needs you, oldest first: how long each waited and what to do.",
    )
    _common(parser)
    _engine(parser)
    args = parser.parse()
    from cairn.cli.handlers import fleet_status

    return fleet_status.status(**vars(args))


def prune(parser: Parser) -> ExitCode:
    """Remove finished tickets' worktrees, never losing work (snapshot first, or refuse)."""
    parser.add_argument("ticket", nargs="?", help="The ticket whose worktree to remove.")
    parser.add_argument(
        "--all-finished", action="store_true", help="Every finished ticket's worktree."
    )
    parser.add_argument("--dry-run", action="store_true", help="Say what would go.")
    _common(parser)
    args = parser.parse()
    from cairn.cli.handlers import fleet_prune

    return fleet_prune.prune(**vars(args))


def dashboard(parser: Parser) -> ExitCode | None:
    """Serve the fleet's dashboard read-only from the files, without a supervisor (temporal:
    from the ticket workflows)."""
    parser.add_argument(
        "--port", type=integer(), default=8765, help="The port to serve on (0: a free one)."
    )
    _host(parser)
    _common(parser)
    _engine(parser)
    a = parser.parse()
    from cairn.cli.handlers.engines import engine

    return engine(a.engine, a.workspace).dashboard(a.json, a.workspace, a.port, a.host)

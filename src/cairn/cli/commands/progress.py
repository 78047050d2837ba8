"""``cairn task|finding|gate|defer|ac``: the Typer declarations (for ``--help``); what they do is
in ``cairn.cli.handlers.progress``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cairn.cli.commands.options import Json, Workspace
from cairn.cli.handlers import progress as handler
from cairn.cli.output import guarded
from cairn.terms import FindingResolution, Verdict

task_app = typer.Typer(help="Report progress on a plan task.", no_args_is_help=True)

RunTicket = Annotated[
    str | None,
    typer.Option(
        "--ticket", "-t", help="Ticket whose live run gets the report (default: CAIRN_RUN_DIR)."
    ),
]
Number = Annotated[str, typer.Argument(help="Task number as the plan gives it.", metavar="N")]
Notes = Annotated[str | None, typer.Option("--notes", help="Why, or what is left.")]


@task_app.command("start")
@guarded
def task_start(
    number: Number, ticket: RunTicket = None, json: Json = False, workspace: Workspace = Path(".")
) -> None:
    """Mark task N in progress."""
    handler.task_start(**locals())


@task_app.command("done")
@guarded
def task_done(
    number: Number,
    files: Annotated[
        list[str] | None,
        typer.Option("--files", "-f", help="Files changed (repeat, or separate with commas)."),
    ] = None,
    outcome: Annotated[str | None, typer.Option("--outcome", help="What now works.")] = None,
    notes: Notes = None,
    ticket: RunTicket = None,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Mark task N completed, with the files it changed and its outcome."""
    handler.task_done(**locals())


@task_app.command("skip")
@guarded
def task_skip(
    number: Number,
    notes: Notes = None,
    ticket: RunTicket = None,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Mark task N skipped; --notes says why."""
    handler.task_skip(**locals())


@task_app.command("defer")
@guarded
def task_defer(
    number: Number,
    notes: Notes = None,
    ticket: RunTicket = None,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Mark task N deferred; --notes says what is left."""
    handler.task_defer(**locals())


@guarded
def finding(
    words: Annotated[
        list[str],
        typer.Argument(
            help="ID to report how a finding was addressed; or: add ID TITLE (reviewers).",
            metavar="[add] ID [TITLE]",
        ),
    ],
    status: Annotated[
        FindingResolution | None, typer.Option("--status", help="How it was addressed.")
    ] = None,
    action: Annotated[str | None, typer.Option("--action", help="What was done.")] = None,
    location: Annotated[str | None, typer.Option("--location", help="path:line (add)")] = None,
    details: Annotated[str | None, typer.Option("--details", help="What is wrong (add)")] = None,
    ticket: RunTicket = None,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Record how a review finding was addressed, or (reviewers) add one: finding add F1 "…"."""
    handler.finding(**locals())


@guarded
def gate(
    name: Annotated[str, typer.Argument(help="Gate name, e.g. Tests or Lint.")],
    result: Annotated[Verdict | None, typer.Option("--result", help="Whether it passed.")] = None,
    command: Annotated[str | None, typer.Option("--command", help="The command run.")] = None,
    ticket: RunTicket = None,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Record a quality gate's result."""
    handler.gate(**locals())


@guarded
def defer(
    item: Annotated[str, typer.Argument(help="What is left for later.")],
    ticket: RunTicket = None,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Add an item to the summary's deferred items."""
    handler.defer(**locals())


@guarded
def ac(
    criterion: Annotated[str, typer.Argument(help="Acceptance criterion id, e.g. AC-2.")],
    result: Annotated[Verdict | None, typer.Option("--result", help="Whether it passed.")] = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Why it fails.")] = None,
    ticket: RunTicket = None,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """(Evaluators) record whether an acceptance criterion is met."""
    handler.ac(**locals())

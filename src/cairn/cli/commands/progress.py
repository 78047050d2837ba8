"""``cairn task|finding|gate|defer``: progress reports into the current run's change summary."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cairn.cli.commands.options import Json, Workspace
from cairn.cli.output import console, emit_json, guarded
from cairn.errors import BadInput
from cairn.terms import FINDING_RESOLUTIONS, VERDICTS

if TYPE_CHECKING:
    from cairn.state.runstate import RunRef
    from cairn.summary import Summary

task_app = typer.Typer(help="Report progress on a plan task.", no_args_is_help=True)

RunTicket = Annotated[
    str | None,
    typer.Option(
        "--ticket", "-t", help="Ticket whose live run gets the report (default: CAIRN_RUN_DIR)."
    ),
]
Number = Annotated[str, typer.Argument(help="Task number as the plan gives it.", metavar="N")]
Notes = Annotated[str | None, typer.Option("--notes", help="Why, or what is left.")]


def _number(text: str) -> int:
    if not text.isdigit():
        raise BadInput(f"task number {text!r} is not a whole number; pass N as in '### Task N'")
    return int(text)


def _locate(workspace: Path, ticket: str | None) -> RunRef:
    from cairn.run.progress import locate

    return locate(workspace, ticket, os.environ)


def _report(ref: RunRef, after: Summary, what: str, json: bool) -> None:
    from cairn.summary.render import status_line

    line = status_line(after)
    if json:
        emit_json(
            {
                "ticket": ref.ticket,
                "run": ref.run_id,
                "summary_path": str(ref.summary_path()),
                "status": line,
                "resolved": after.resolved(),
                "total": after.total(),
            }
        )
        return
    console.print(f"{what} · {line}")


@task_app.command("start")
@guarded
def task_start(
    number: Number, ticket: RunTicket = None, json: Json = False, workspace: Workspace = Path(".")
) -> None:
    """Mark task N in progress."""
    from cairn.run import progress

    ref = _locate(workspace, ticket)
    n = _number(number)
    _report(ref, progress.task_start(ref, n), f"task {n} in progress", json)


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
    from cairn.run import progress

    ref = _locate(workspace, ticket)
    n = _number(number)
    paths = [part.strip() for value in files or [] for part in value.split(",") if part.strip()]
    after = progress.task_done(ref, n, files=paths, outcome=outcome, notes=notes)
    _report(ref, after, f"task {n} completed", json)


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
    _set_aside(workspace, ticket, number, notes, "skipped", json)


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
    _set_aside(workspace, ticket, number, notes, "deferred", json)


def _set_aside(
    workspace: Path, ticket: str | None, number: str, notes: str | None, status: str, json: bool
) -> None:
    from cairn.run import progress

    ref = _locate(workspace, ticket)
    n = _number(number)
    _report(ref, progress.task_set_aside(ref, n, status, notes), f"task {n} {status}", json)


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
        str, typer.Option("--status", help="FIXED, NOT_FIXED or ALREADY_RESOLVED.")
    ] = "",
    action: Annotated[str | None, typer.Option("--action", help="What was done.")] = None,
    location: Annotated[str | None, typer.Option("--location", help="path:line (add)")] = None,
    details: Annotated[str | None, typer.Option("--details", help="What is wrong (add)")] = None,
    ticket: RunTicket = None,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Record how a review finding was addressed, or (reviewers) add one: finding add F1 "…"."""
    from cairn.run import progress

    if words and words[0] == "add":
        if len(words) != 3:
            raise BadInput('finding add takes an id and a title: cairn finding add F1 "title"')
        ref = _locate(workspace, ticket)
        found = progress.add_finding(ref, words[1], words[2], location, details)
        if json:
            emit_json(found)
        else:
            console.print(f"{words[1]} recorded in round {found.round}")
        return
    if len(words) != 1:
        raise BadInput("finding takes one id: cairn finding F1 --status FIXED --action '…'")
    finding_id = words[0]
    if status not in FINDING_RESOLUTIONS:
        allowed = ", ".join(FINDING_RESOLUTIONS)
        raise BadInput(f"--status must be one of {allowed} (got {status!r}); pass one of them")
    ref = _locate(workspace, ticket)
    after = progress.finding(ref, finding_id, status, action)
    _report(ref, after, f"{finding_id} {status}", json)


@guarded
def gate(
    name: Annotated[str, typer.Argument(help="Gate name, e.g. Tests or Lint.")],
    result: Annotated[str, typer.Option("--result", help="pass or fail.")] = "",
    command: Annotated[str | None, typer.Option("--command", help="The command run.")] = None,
    ticket: RunTicket = None,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Record a quality gate's result."""
    from cairn.run import progress

    if result not in VERDICTS:
        raise BadInput(f"--result must be pass or fail (got {result!r}); pass one of them")
    ref = _locate(workspace, ticket)
    _report(ref, progress.gate(ref, name, result, command), f"gate {name}: {result}", json)


@guarded
def defer(
    item: Annotated[str, typer.Argument(help="What is left for later.")],
    ticket: RunTicket = None,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Add an item to the summary's deferred items."""
    from cairn.run import progress

    ref = _locate(workspace, ticket)
    _report(ref, progress.defer_item(ref, item), "deferred item added", json)


@guarded
def ac(
    criterion: Annotated[str, typer.Argument(help="Acceptance criterion id, e.g. AC-2.")],
    result: Annotated[str, typer.Option("--result", help="pass or fail.")] = "",
    reason: Annotated[str | None, typer.Option("--reason", help="Why it fails.")] = None,
    ticket: RunTicket = None,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """(Evaluators) record whether an acceptance criterion is met."""
    from cairn.run import progress

    if result not in VERDICTS:
        raise BadInput(f"--result must be pass or fail (got {result!r}); pass one of them")
    ref = _locate(workspace, ticket)
    after = progress.record_ac(ref, criterion, result, reason)
    if json:
        emit_json(after)
    else:
        console.print(f"{criterion}: {result}")

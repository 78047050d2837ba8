"""``cairn task|finding|gate|defer|ac``: progress reports into the current run's change summary."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.cli.output import emit_json, say
from cairn.errors import BadInput
from cairn.terms import FINDING_RESOLUTIONS, VERDICTS

if TYPE_CHECKING:
    from cairn.state.runstate import RunRef
    from cairn.summary import Summary


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
    say(f"{what} · {line}")


def task_start(
    number: str, ticket: str | None = None, json: bool = False, workspace: Path = Path(".")
) -> None:
    from cairn.run import progress

    ref = _locate(workspace, ticket)
    n = _number(number)
    _report(ref, progress.task_start(ref, n), f"task {n} in progress", json)


def task_done(
    number: str,
    files: list[str] | None = None,
    outcome: str | None = None,
    notes: str | None = None,
    ticket: str | None = None,
    json: bool = False,
    workspace: Path = Path("."),
) -> None:
    from cairn.run import progress

    ref = _locate(workspace, ticket)
    n = _number(number)
    paths = [part.strip() for value in files or [] for part in value.split(",") if part.strip()]
    after = progress.task_done(ref, n, files=paths, outcome=outcome, notes=notes)
    _report(ref, after, f"task {n} completed", json)


def task_skip(
    number: str,
    notes: str | None = None,
    ticket: str | None = None,
    json: bool = False,
    workspace: Path = Path("."),
) -> None:
    _set_aside(workspace, ticket, number, notes, "skipped", json)


def task_defer(
    number: str,
    notes: str | None = None,
    ticket: str | None = None,
    json: bool = False,
    workspace: Path = Path("."),
) -> None:
    _set_aside(workspace, ticket, number, notes, "deferred", json)


def _set_aside(
    workspace: Path, ticket: str | None, number: str, notes: str | None, status: str, json: bool
) -> None:
    from cairn.run import progress

    ref = _locate(workspace, ticket)
    n = _number(number)
    _report(ref, progress.task_set_aside(ref, n, status, notes), f"task {n} {status}", json)


def finding(
    words: list[str],
    status: str | None = None,
    action: str | None = None,
    location: str | None = None,
    details: str | None = None,
    ticket: str | None = None,
    json: bool = False,
    workspace: Path = Path("."),
) -> None:
    from cairn.run import progress

    if words and words[0] == "add":
        if len(words) != 3:
            raise BadInput('finding add takes an id and a title: cairn finding add F1 "title"')
        ref = _locate(workspace, ticket)
        found = progress.add_finding(ref, words[1], words[2], location, details)
        if json:
            emit_json(found)
        else:
            say(f"{words[1]} recorded in round {found.round}")
        return
    if len(words) != 1:
        raise BadInput("finding takes one id: cairn finding F1 --status FIXED --action '…'")
    finding_id = words[0]
    if status not in FINDING_RESOLUTIONS:
        allowed = ", ".join(FINDING_RESOLUTIONS)
        raise BadInput(f"finding {finding_id} needs --status; pass one of {allowed}")
    ref = _locate(workspace, ticket)
    after = progress.finding(ref, finding_id, status, action)
    _report(ref, after, f"{finding_id} {status}", json)


def gate(
    name: str,
    result: str | None = None,
    command: str | None = None,
    ticket: str | None = None,
    json: bool = False,
    workspace: Path = Path("."),
) -> None:
    from cairn.run import progress

    if result not in VERDICTS:
        raise BadInput("--result is missing; pass --result pass or --result fail")
    ref = _locate(workspace, ticket)
    _report(ref, progress.gate(ref, name, result, command), f"gate {name}: {result}", json)


def defer(
    item: str, ticket: str | None = None, json: bool = False, workspace: Path = Path(".")
) -> None:
    from cairn.run import progress

    ref = _locate(workspace, ticket)
    _report(ref, progress.defer_item(ref, item), "deferred item added", json)


def ac(
    criterion: str,
    result: str | None = None,
    reason: str | None = None,
    ticket: str | None = None,
    json: bool = False,
    workspace: Path = Path("."),
) -> None:
    from cairn.run import progress

    if result not in VERDICTS:
        raise BadInput("--result is missing; pass --result pass or --result fail")
    ref = _locate(workspace, ticket)
    after = progress.record_ac(ref, criterion, result, reason)
    if json:
        emit_json(after)
    else:
        say(f"{criterion}: {result}")

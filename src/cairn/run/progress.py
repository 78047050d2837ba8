"""Progress reports from agents and people: tasks, findings, gates, deferred items.

The run is found from ``CAIRN_RUN_DIR`` (set for every dispatch) or from a ticket's marker. Each
report updates the change summary, the marker and the journal, each atomically.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cairn import summary, tickets
from cairn.errors import BadInput
from cairn.state import journal, marker
from cairn.state.layout import Layout, artifacts, discover, latest_artifact
from cairn.state.runstate import RunRef, change_summary
from cairn.summary import Summary
from cairn.util import clock, durable

if TYPE_CHECKING:
    from cairn.run import evaluation, review

RUN_DIR_ENV = "CAIRN_RUN_DIR"


def locate(
    workspace: Path | str,
    ticket: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> RunRef:
    """The run that progress reports go to: ``CAIRN_RUN_DIR``, else the ticket's live run."""
    env = os.environ if environ is None else environ
    if ticket is None and env.get(RUN_DIR_ENV):
        layout, found_ticket, run_id = Layout.from_run_dir(Path(env[RUN_DIR_ENV]))
        return RunRef(layout, found_ticket, run_id)
    repo, _, layout = discover(workspace)
    if ticket is None:
        ticket = tickets.from_branch(repo.current_branch())
    current = marker.read(layout.marker_path(tickets.validate(ticket)))
    if current is None or current.run is None:
        raise BadInput(
            f"ticket {ticket} has no run in progress; start one with cairn run, "
            "or pass --ticket for another ticket"
        )
    if not layout.run_dir(ticket, current.run).is_dir():
        raise BadInput(
            f"the marker of ticket {ticket} names run {current.run}, which does not exist; "
            "check with cairn catchup"
        )
    return RunRef(layout, ticket, current.run)


def task_start(ref: RunRef, number: int) -> Summary:
    return change_summary(
        ref,
        lambda s: summary.start_task(s, number, clock.now()),
        "task",
        task=number,
        status="in progress",
    )


def task_done(
    ref: RunRef,
    number: int,
    files: list[str] | None = None,
    outcome: str | None = None,
    notes: str | None = None,
) -> Summary:
    return change_summary(
        ref,
        lambda s: summary.complete_task(
            s, number, clock.now(), files=files, outcome=outcome, notes=notes
        ),
        "task",
        task=number,
        status="completed",
        files=files,
    )


def task_set_aside(ref: RunRef, number: int, status: str, notes: str | None) -> Summary:
    """Mark a task ``skipped`` or ``deferred``; the notes saying why are required."""
    if not notes or not notes.strip():
        verb = {"skipped": "skip", "deferred": "defer"}[status]
        raise BadInput(f"task {verb} needs --notes saying why; nothing was written")
    operation = {"skipped": summary.skip_task, "deferred": summary.defer_task}[status]
    return change_summary(
        ref,
        lambda s: operation(s, number, clock.now(), notes),
        "task",
        task=number,
        status=status,
    )


def finding(ref: RunRef, finding_id: str, status: str, action: str | None) -> Summary:
    return change_summary(
        ref,
        lambda s: summary.address_finding(s, finding_id, status, clock.now(), action=action),
        "finding",
        finding=finding_id,
        status=status,
    )


def gate(ref: RunRef, name: str, result: str, command: str | None) -> Summary:
    return change_summary(
        ref,
        lambda s: summary.set_gate(s, name, result, clock.now(), command=command),
        "gate",
        gate=name,
        result=result,
        command=command,
    )


def defer_item(ref: RunRef, item: str) -> Summary:
    return change_summary(
        ref, lambda s: summary.add_deferred(s, item, clock.now()), "deferred", item=item
    )


def add_finding(
    ref: RunRef, finding_id: str, title: str, location: str | None, details: str | None
) -> review.Review:
    """Add a reviewer's finding to the run's current review."""
    from cairn.run import review  # pydantic models: loaded only by the reviewers' command

    with durable.locked(ref.lock_path):
        found = latest_artifact(ref.run_dir, "reviewer", "review")
        if found is None:
            raise BadInput(
                f"run {ref.run_id} of ticket {ref.ticket} has no review in progress; "
                "findings are added during a review phase"
            )
        after = review.add(review.load(found.path), finding_id, title, location, details)
        review.save(found.path, after)
        journal.record(ref.run_dir, "finding", finding=finding_id, status="added", title=title)
    return after


def record_ac(ref: RunRef, ident: str, result: str, reason: str | None) -> evaluation.Evaluation:
    """Record the evaluator's verdict on one acceptance criterion of the current evaluation."""
    from cairn.run import evaluation  # pydantic models: loaded only by the evaluators' command

    with durable.locked(ref.lock_path):
        found = [
            a
            for a in artifacts(ref.run_dir)
            if a.role == "evaluator" and a.name.startswith("eval-round-")
        ]
        if not found:
            raise BadInput(
                f"run {ref.run_id} of ticket {ref.ticket} has no evaluation in progress; "
                "acceptance criteria are checked during an evaluate phase"
            )
        path = found[-1].path
        after = evaluation.record(evaluation.load(path), ident, result, reason)
        evaluation.save(path, after)
        journal.record(ref.run_dir, "gate", gate=ident, result=result, reason=reason)
    return after

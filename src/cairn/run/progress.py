"""Progress reports from agents and people: tasks, findings, gates, deferred items.

The run is found from ``CAIRN_RUN_DIR`` (set for every dispatch) or from a ticket's marker. Each
report updates the change summary, the marker and the journal, each atomically.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn import summary, tickets
from cairn.errors import BadInput
from cairn.state import journal, marker
from cairn.state.layout import Layout, artifacts, discover, latest_artifact
from cairn.state.runstate import RunRef, edit_summary, record
from cairn.summary import Summary
from cairn.terms import ENV_AGENT, ENV_RUN_DIR, FINDING_RESOLUTIONS, JournalEvent
from cairn.util import barrier, clock, durable

if TYPE_CHECKING:
    from cairn.run import evaluation, review


def locate(
    workspace: Path | str,
    ticket: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> RunRef:
    """The run that progress reports go to: ``CAIRN_RUN_DIR``, else the ticket's live run."""
    env = os.environ if environ is None else environ
    if ticket is None and env.get(ENV_RUN_DIR):
        layout, found_ticket, run_id = Layout.from_run_dir(Path(env[ENV_RUN_DIR]))
        return RunRef(layout, found_ticket, run_id)
    repo, _, layout = discover(workspace)
    if ticket is None:
        from cairn.state import branches

        ticket = branches.default_ticket(repo, layout)[0]
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
    return edit_summary(ref, None, "task", task=number, status="in progress")


def task_done(
    ref: RunRef,
    number: int,
    files: list[str] | None = None,
    outcome: str | None = None,
    notes: str | None = None,
) -> Summary:
    agent = os.environ.get(ENV_AGENT) or None  # the run's agent that reports it
    after = edit_summary(
        ref,
        None,
        "task",
        task=number,
        status="completed",
        files=files,
        outcome=outcome,
        notes=notes,
        **({"agent": agent} if agent else {}),
    )
    confirm(ref, f"task {number} completed")  # on a worker: the completion is on the remote
    return after


def task_set_aside(ref: RunRef, number: int, status: str, notes: str | None) -> Summary:
    """Mark a task ``skipped`` or ``deferred``; the notes saying why are required."""
    if not notes or not notes.strip():
        verb = {"skipped": "skip", "deferred": "defer"}[status]
        raise BadInput(f"task {verb} needs --notes saying why; nothing was written")
    after = edit_summary(ref, None, "task", task=number, status=status, notes=notes)
    confirm(ref, f"task {number} {status}")
    return after


def confirm(ref: RunRef, what: str) -> None:
    """On a worker of the fleet on Temporal: return once the report is on the shared remote.
    When the worker does not confirm it in time (a frozen or cut-off worker), the report fails
    closed: the run that owns the ticket is stopped (SIGTERM: it stops its agent, snapshots and
    ends interrupted), and ``barrier.Unconfirmed`` says so (exit 3)."""
    if barrier.wait_for_checkpoint():
        return
    stopped = _stop_run(ref)
    raise barrier.Unconfirmed(
        f"{what} is recorded here but the worker did not push it to the shared remote within "
        f"{barrier.waiting_time():g}s, so it is not confirmed; "
        f"{'the run stops' if stopped else 'stop this run'}: the ticket resumes from what the "
        "remote holds, where this task may not be done yet"
    )


def _stop_run(ref: RunRef) -> bool:
    """SIGTERM to the run the ticket's marker names as its owner, when it is a live process of
    this host (its recorded start time matches); True once it was sent. This process ignores
    SIGTERM from then on: the run stops its agent's process group, of which this report is
    part, and the report's line must still reach the agent."""
    import signal
    import threading

    from cairn.state import owner
    from cairn.util import procs

    try:
        found = marker.read(ref.layout.marker_path(ref.ticket))
    except Exception:  # a marker that cannot be read names no run to stop
        return False
    run = found.owner if found is not None else None
    if run is None or run.host != owner.this_host():
        return False
    if run.pid == os.getpid():
        return False
    if not procs.started_as(run.pid, run.pid_started_at, run.pid_started_since_boot):
        return False
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        os.kill(run.pid, signal.SIGTERM)
    except OSError:
        return False
    return True


def finding(ref: RunRef, finding_id: str, status: str, action: str | None) -> Summary:
    if status not in FINDING_RESOLUTIONS:
        raise BadInput(f"finding status {status!r} is not one of {', '.join(FINDING_RESOLUTIONS)}")
    return edit_summary(ref, None, "finding", finding=finding_id, status=status, action=action)


def gate(ref: RunRef, name: str, result: str, command: str | None) -> Summary:
    return edit_summary(
        ref,
        lambda s: summary.set_gate(s, name, result, clock.now(), command=command),
        "gate",
        gate=name,
        result=result,
        command=command,
    )


def defer_item(ref: RunRef, item: str) -> Summary:
    return edit_summary(ref, None, "deferred", item=item)


def add_finding(
    ref: RunRef, finding_id: str, title: str, location: str | None, details: str | None
) -> review.Review:
    """Add a reviewer's finding to the run's current review: journalled first, like every
    transition, then written."""
    from cairn.run import review  # loaded only by the reviewers' command

    with durable.locked(ref.lock_path):
        found = latest_artifact(ref.run_dir, "reviewer", "review")
        if found is None:
            raise BadInput(
                f"run {ref.run_id} of ticket {ref.ticket} has no review in progress; "
                "findings are added during a review phase"
            )
        after = review.add(catch_up_review(ref, found.path), finding_id, title, location, details)
        fields = {"title": title, "location": location, "details": details}
        _journal_then_write(
            ref,
            found.path,
            review.render(after),
            "finding",
            finding=finding_id,
            status="added",
            review=found.path.name,
            **fields,
        )
    return after


def record_ac(ref: RunRef, ident: str, result: str, reason: str | None) -> evaluation.Evaluation:
    """Record the evaluator's verdict on one acceptance criterion of the current evaluation."""
    from cairn.run import evaluation  # loaded only by the evaluators' command

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
        after = evaluation.record(catch_up_evaluation(ref, path), ident, result, reason)
        _journal_then_write(
            ref,
            path,
            evaluation.render(after),
            "gate",
            gate=ident,
            result=result,
            reason=reason,
            criterion=True,
            evaluation=path.name,
        )
    return after


def catch_up_review(ref: RunRef, path: Path) -> review.Review:
    """The review at ``path`` with every finding the journal says was added to it. A
    ``cairn finding add`` killed between its journal event and the file is completed here, by
    the next writer of the review or by the loop reading it."""
    from cairn.run import review

    with durable.locked(ref.lock_path):
        current = repaired = review.load(path)
        for event in _events_for(ref, "finding", "review", path):
            ident = str(event.get("finding"))
            if event.get("status") == "added" and all(f.id != ident for f in repaired.findings):
                with contextlib.suppress(BadInput):
                    repaired = review.add(
                        repaired,
                        ident,
                        str(event.get("title") or ident),
                        event.get("location"),
                        event.get("details"),
                    )
        if repaired != current:
            review.save(path, repaired)
        return repaired


def catch_up_evaluation(ref: RunRef, path: Path) -> evaluation.Evaluation:
    """The evaluation at ``path`` with every verdict the journal records for it, in order."""
    from cairn.run import evaluation

    with durable.locked(ref.lock_path):
        current = repaired = evaluation.load(path)
        for event in _events_for(ref, "gate", "evaluation", path):
            with contextlib.suppress(BadInput):
                repaired = evaluation.record(
                    repaired, str(event.get("gate")), str(event.get("result")), event.get("reason")
                )
        if repaired != current:
            evaluation.save(path, repaired)
        return repaired


def _events_for(ref: RunRef, name: str, key: str, path: Path) -> list[dict[str, Any]]:
    events, _ = journal.read(ref.run_dir)
    return [e for e in events if e.get("event") == name and e.get(key) == path.name]


def _journal_then_write(
    ref: RunRef, path: Path, text: str, event: JournalEvent, **fields: Any
) -> None:
    """Stage ``text`` for ``path``, journal the event (the commit point), put it in place."""
    durable.check_writable(path)
    staged = durable.stage(path, text)
    try:
        record(ref, event, **fields)
    except BaseException:
        durable.discard([staged])
        raise
    durable.put_in_place([staged])

"""Catch-up in words: the paragraph for an agent's context (``cairn catchup --format context``,
the MCP ``catchup`` tool, Claude Code's session-start hook) and what a run is doing in each
phase, said plainly (``implementing the plan``, not the phase's name)."""

from __future__ import annotations

from cairn.state import accounting
from cairn.state.catchup import RESOLVED_TASK, CatchupReport, TaskBrief

# What a run is doing in each phase, in words (the marker and the JSON keep the phase's name).
DOING = {
    "implement": "implementing the plan",
    "evaluate": "checking the acceptance criteria",
    "review": "reviewing the changes",
    "fix": "fixing the review's findings",
    "done": "finishing",
}


def doing(phase: str | None) -> str:
    """``implementing the plan``; a phase cairn does not know (another tool's marker) is
    ``the <phase> step``."""
    if phase is None:
        return "an unknown step"
    return DOING.get(phase, f"the {phase} step")


def split_done(tasks: list[TaskBrief]) -> tuple[str, str]:
    """The ids of the tasks done and of those remaining, each ``none`` when empty."""
    done = [t.id for t in tasks if t.status in RESOLVED_TASK]
    remaining = [t.id for t in tasks if t.status not in RESOLVED_TASK]
    return ", ".join(done) or "none", ", ".join(remaining) or "none"


def context_paragraph(report: CatchupReport) -> str:
    """A short paragraph to place into an agent's context."""
    ticket = report.ticket
    if report.state == "none":
        text = f"There is no cairn run for ticket {ticket}."
        if report.snapshot is not None:
            text += (
                f" Uncommitted work was saved at {report.snapshot.ref} "
                f"({report.snapshot.commit[:7]}, {report.snapshot.time})."
            )
        return text
    if report.state == "done":
        return (
            f"The last run of ticket {ticket} ({report.run}) finished: "
            f"{report.summary_status or 'completed'}. There is nothing to resume."
        )
    where = [doing(report.phase)]
    if report.round is not None:
        where.append(f"round {report.round}")
    if report.task is not None and report.mode == "implementation":
        title = f' ("{report.task_title}")' if report.task_title else ""
        where.append(f"task {report.task} of {report.total}{title}")
    if report.finding is not None:
        where.append(f"finding {report.finding} of {report.total}")
    lead = {
        "in_progress": "A run is in the middle of",
        "interrupted": "You were in the middle of",
        "needs_input": "The agent stopped for want of input (it made no progress) in the middle of",
        "stale": "A stale marker says a run was in the middle of",
    }[report.state]
    parts = [f"{lead} {', '.join(where)} on ticket {ticket}."]
    if report.tasks:
        done, remaining = split_done(report.tasks)
        parts.append(f"Tasks done: {done}; remaining: {remaining}.")
    if report.items and report.mode != "implementation":
        done = ", ".join(report.done) or "none"
        remaining = ", ".join(report.remaining) or "none"
        parts.append(f"Findings done: {done}; remaining: {remaining}.")
    if report.state in ("interrupted", "needs_input") and report.summary_status:
        parts.append(f"The change summary says: {report.summary_status}.")
    if report.denials:
        parts.append(f"The {accounting.denials_text(report.denials)}.")
    if report.owner_detail and report.owner_state not in (None, "unknown"):
        parts.append(f"Owner: {report.owner_detail}.")
    if report.inferred:
        parts.append("(Inferred from the run's files; there was no marker.)")
    if report.snapshot is not None:
        parts.append(
            f"Uncommitted work was saved at {report.snapshot.ref} "
            f"({report.snapshot.commit[:7]}, {report.snapshot.time})."
        )
    if report.next_command:
        parts.append(f"Resume with: {report.next_command}")
    elif report.state == "in_progress":
        parts.append("Wait for it to finish; do not start a second run.")
    return " ".join(parts)

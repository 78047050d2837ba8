"""What the issue trackers (``github``, ``linear``) say on an issue, one text for each step of a
ticket, so every tracker says the same thing in the same words; and the idempotency key of a
transition, which each message of it carries."""

from __future__ import annotations

import msgspec

from cairn.fleet import fleetstate
from cairn.fleet.facts import Facts

SIGNATURE = "— cairn"
ENDED = {
    "needs_review": "Needs review",
    "needs_input": "Needs input",
    "failed": "Failed",
    "interrupted": "Interrupted",
}


def key(record: fleetstate.FleetTicket | None, state: str) -> str | None:
    """The key of ``record``'s transition to ``state`` (None: a ticket with no record)."""
    if record is None:
        return None
    return fleetstate.key_of(msgspec.structs.replace(record, state=state))


def signed(text: str) -> str:
    return f"{text}\n\n{SIGNATURE}"


def started(ticket: str, attempt: int, most: int) -> str:
    again = " (resuming from its change summary and snapshot)" if attempt > 1 else ""
    return f"Started attempt {attempt} of {most} on branch `cairn/{ticket}`{again}."


def fix_round(ticket: str, detail: str | None) -> str:
    why = f" ({detail})" if detail else ""
    return (
        f"A fix round was asked for{why}: the run of branch `cairn/{ticket}` resumes to answer it."
    )


def approved(detail: str | None) -> str:
    return f"Approved in cairn{f' ({detail})' if detail else ''}."


def waiting(record: fleetstate.FleetTicket | None, detail: str | None) -> str:
    then = "its agent's reset"
    if record is not None and record.next_attempt_at:
        then = record.next_attempt_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    why = f": {detail}" if detail else ""
    return (
        f"Waiting for an agent's limit to reset{why}.\n\nThe fleet starts it again at "
        f"{then} (the wait does not count as an attempt)."
    )


def next_attempt(record: fleetstate.FleetTicket | None, state: str, most: int) -> str | None:
    """When a retried ticket's next attempt starts (None: the fleet was stopped)."""
    if state == "retrying" and record is not None and record.next_attempt_at:
        then = record.next_attempt_at.strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"Attempt {record.attempt + 1} of {most} starts at {then}."
    return None


def interrupted(told: Facts, detail: str | None, next_step: str | None) -> str:
    step = next_step or "The fleet was stopped; the next `cairn fleet start` resumes it."
    return f"{headline('Interrupted', told, detail)}\n\n{snapshot(told)}\n\n{step}"


def completed(told: Facts, detail: str | None, where: str) -> str:
    """A completed ticket: its status line, and ``where`` (what became of its branch)."""
    return f"{headline('Completed', told, detail)}\n\n{where}"


def ended(ticket: str, state: str, told: Facts, detail: str | None, where: str | None) -> str:
    """A ticket that ended without completing: its status line, the detail, ``where`` (its
    branch, when it was pushed), the snapshot and how to go on."""
    text = headline(ENDED.get(state, state), told, detail)
    if detail and detail not in text:
        text += f"\n\n{detail}"
    if where:
        text += f"\n\n{where}"
    text += f"\n\n{snapshot(told)}"
    if state == "interrupted" and "cairn resume" not in text:
        text += f"\n\n`cairn resume {ticket}` continues it."
    return text


def headline(what: str, told: Facts, detail: str | None) -> str:
    """The summary's status line when it says ``what`` already, else ``what: …``."""
    status = told.status_line
    if status and status.lower().startswith(what.lower()):
        return status
    return f"{what}: {status or detail or '(no change summary yet)'}"


def snapshot(told: Facts) -> str:
    if told.snapshot is None:
        return "No snapshot was taken."
    return (
        f"Snapshot `{told.snapshot_ref}` at `{told.snapshot[:12]}` "
        f"(`git diff {told.branch} {told.snapshot[:12]}` shows what is not committed)."
    )


def refused(problem: str, field: str) -> str:
    """An issue that is not a plan (``field``: where its plan would be)."""
    return (
        f"cairn cannot run this issue: {problem}\n\n"
        f"The fleet reads the issue again at each poll, so editing its {field} is enough."
    )

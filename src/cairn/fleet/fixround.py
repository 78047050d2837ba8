"""A fix round of a fleet ticket's finished run: findings a person (or cairn itself, e.g. a land
whose merge conflicts) asks the ticket's agent to answer.

``ask`` reopens the ticket's latest run where it ended, as one transition under the ticket's
lock: the findings go into the run's next review artifact (``{NN}_reviewer_review.md``, its
header saying who asked: ``(by NAME)``), the journal records a ``fix_round`` event (round, who,
why, the findings and whatever the caller adds), and the marker is written again in phase
``fix`` with no owner, so the run reads as interrupted. Then it leaves a ``fix`` request
(``cairn.fleet.fleetcontrol``): the supervisor, or the asking command when none runs, takes the
ticket to ``retrying``, due now, and its next attempt is ``cairn resume``, which fixes every
finding of that review (``Orchestrator._persons_round``): the coder answers each one in the
round's change summary (FIXED / NOT_FIXED / ALREADY_RESOLVED) and the run ends ``completed``, or
``needs_review`` when one was NOT_FIXED.

``decide`` and ``changes`` are ``cairn.fleet.control``'s rule for the ``fix`` and ``approve``
actions.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec
from msgspec import Struct

from cairn.errors import BadInput
from cairn.fleet import fleetcontrol
from cairn.fleet.fleetstate import FleetTicket
from cairn.run import review
from cairn.state import journal, marker, transition
from cairn.state.layout import Layout, artifact_path, latest_artifact
from cairn.state.runstate import RunRef
from cairn.terms import FINISHED, REVIEWABLE_STATES, FleetAction, FleetState
from cairn.util import clock, durable

REASON = "fix_round"  # the record's last_reason while its fix round waits to start
DETAIL_CAP = 300  # characters of the record's detail (a request file is at most 4 KB)


class Finding(Struct, frozen=True, kw_only=True):
    """One finding to fix: ``id`` like ``R1``, a one-line ``title``, ``location`` ``path:line``
    and ``details`` (the whole comment)."""

    id: str
    title: str
    location: str | None = None
    details: str | None = None


class Round(NamedTuple):
    ticket: str
    run: str
    round: int
    review: str  # the review artifact's file name
    findings: list[Finding]
    request: fleetcontrol.Request


def refusal(record: FleetTicket) -> str | None:
    """Why ``record``'s ticket cannot have a fix round now, or None."""
    if record.state in REVIEWABLE_STATES:
        return None
    ticket = record.ticket
    if record.state in ("queued", "running", "retrying", "waiting"):
        return (
            f"ticket {ticket} is {record.state}: its run is not finished; wait until it is "
            "completed or needs review"
        )
    return (
        f"ticket {ticket} is {record.state.replace('_', ' ')}, and only a finished run "
        f"({', '.join(sorted(REVIEWABLE_STATES))}) can be reviewed; "
        f"cairn fleet retry {ticket} lets it finish first"
    )


def decide(action: FleetAction, record: FleetTicket) -> tuple[FleetState | None, str | None]:
    """``fix``: a reviewable ticket goes to ``retrying``; ``approve``: a finished one to
    ``approved`` (one approved already is unchanged)."""
    if action == "approve" and record.state == "approved":
        return None, None
    why = refusal(record)
    if action == "approve" and why is None and record.state not in FINISHED:
        why = f"ticket {record.ticket} is {record.state}"
    if why is not None:
        return None, why
    return ("retrying" if action == "fix" else "approved"), None


def changes(action: FleetAction, state: FleetState, detail: str | None) -> dict[str, Any]:
    """The record's new fields: a fix round is due now, its attempts counted afresh."""
    if action == "approve":
        return {"state": state, "next_attempt_at": None, "detail": detail or "approved"}
    return {
        "state": state,
        "attempt": 0,
        "next_attempt_at": None,
        "last_reason": REASON,
        "detail": detail or "a fix round was asked for",
    }


def ask(
    layout: Layout,
    record: FleetTicket,
    findings: list[Finding],
    by: str,
    why: str,
    **noted: Any,
) -> Round:
    """Reopen ``record``'s ticket's latest run for a fix round of ``findings``, asked ``by``
    someone ``why`` (``review``, …); ``noted`` goes into the journal's ``fix_round`` event.
    BadInput, with nothing written, when the ticket cannot have one."""
    ticket = record.ticket
    refused = refusal(record)
    if refused is not None:
        raise BadInput(refused)
    if not findings:
        raise BadInput("a fix round needs at least one finding; give the agent something to fix")
    run_id = layout.latest_run(ticket)
    if run_id is None:
        raise BadInput(f"ticket {ticket} has no run to fix; cairn fleet start runs it first")
    ref = RunRef(layout, ticket, run_id)
    with durable.locked(ref.lock_path):
        if marker.read(ref.marker_path) is not None:
            raise BadInput(
                f"ticket {ticket}'s run {run_id} is not finished (its marker is there); wait "
                f"for it, or cairn resume {ticket}"
            )
        number = _next_round(ref)
        now = clock.now()
        scaffold = review.Review(
            ticket=ticket,
            round=number,
            by=by,
            findings=[review.ReviewFinding(**msgspec.structs.asdict(f)) for f in findings],
        )
        path = artifact_path(ref.run_dir, "reviewer", "review")
        reopened = marker.Marker(
            skill="impl",
            phase="fix",
            round=number,
            started_at=now,
            last_updated=now,
            ticket=ticket,
            run=run_id,
        )
        event = journal.entry(
            "fix_round",
            round=number,
            by=by,
            why=why,
            review=path.name,
            findings=[msgspec.to_builtins(f) for f in findings],
            **noted,
        )
        state = ref.read(with_summary=False)
        writes = [(path, review.render(scaffold)), (ref.marker_path, marker.render(reopened))]
        transition.commit(state, event, writes)
    ids = ", ".join(f.id for f in findings)
    detail = f"{why}: a fix round of {len(findings)} finding(s) ({ids}) asked by {by}"
    request = fleetcontrol.ask(layout, ticket, "fix", detail=detail[:DETAIL_CAP])
    return Round(ticket, run_id, number, path.name, findings, request)


def _next_round(ref: RunRef) -> int:
    """One past the run's latest review round (1 for a run with no review yet)."""
    found = latest_artifact(ref.run_dir, "reviewer", "review")
    if found is None:
        return 1
    return review.load(found.path).round + 1

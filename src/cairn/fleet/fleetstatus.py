"""``cairn fleet status``: one row per fleet ticket, from the files alone (no supervisor needed).

A row joins the ticket's fleet record (``fleetstate``) with what ``cairn status`` reads of its
run (``status.ticket_row``: marker, latest run, the head of its change summary), the last event
of the run's journal (its tail only) and the ticket's snapshot ref (one dated
``for-each-ref`` for all tickets).
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.errors import CairnError
from cairn.fleet import fleetstate, refusals
from cairn.state import journal, status
from cairn.state.layout import Layout, discover
from cairn.terms import FleetState
from cairn.util import clock
from cairn.util.durations import parse_duration
from cairn.util.records import Record, field, plain

if TYPE_CHECKING:
    from cairn.config import Config
    from cairn.git import Repo

SHORT_SHA = 10


class FleetRow(Record, frozen=False):
    ticket: str
    state: FleetState
    plan: str
    phase: str | None = None
    task: int | None = None
    total: int | None = None
    attempt: int = 0
    max_attempts: int | None = None
    turn: int | None = None  # turns used in the current dispatch
    max_turns: int | None = None  # that dispatch's cap
    snapshot: str | None = None  # short sha of refs/cairn/wip/<ticket>
    snapshot_age_seconds: int | None = None
    worktree: str | None = None
    branch: str | None = None
    last_event: str | None = None
    last_event_age_seconds: int | None = None
    next_attempt_at: datetime | None = None
    pid: int | None = None
    last_exit: int | None = None
    last_reason: str | None = None
    detail: str | None = None
    run: str | None = None
    run_state: str | None = None  # the run's own state, as `cairn status` gives it
    updated: datetime


class FleetStatus(Record, frozen=False):
    rows: list[FleetRow] = field(default_factory=list)
    refused: list[refusals.Refusal] = field(default_factory=list)  # the tracker's last poll's
    warnings: list[str] = field(default_factory=list)


def refused_row(refusal: refusals.Refusal) -> dict[str, Any]:
    """A refused entry as a row of ``cairn fleet status --json`` and the dashboard: every key
    of a ticket's row, ``state`` ``refused``, ``plan`` the entry, ``detail`` why and the fix,
    ``ticket`` the id it would have (null when it names none)."""
    row: dict[str, Any] = dict.fromkeys(FleetRow.model_fields)
    row.update(
        ticket=refusal.ticket,
        state=refusals.REFUSED,
        plan=refusal.plan,
        attempt=0,
        detail=refusal.reason,
        updated=plain(refusal.since, json_mode=True),
    )
    return row


def fleet_status(
    workspace: Path | str = ".", discovered: tuple[Repo, Config, Layout] | None = None
) -> FleetStatus:
    """The rows of the repository at ``workspace`` (``discovered``: it, already read)."""
    repo, config, layout = discovered or discover(workspace)
    report = FleetStatus()
    report.refused = refusals.read(layout, report.warnings)
    records = fleetstate.listing(layout, report.warnings)
    if not records:
        return report
    fleet_config = getattr(config, "fleet", None)
    max_attempts = getattr(fleet_config, "max_attempts", None)
    stale_after = parse_duration(config.marker.stale_after)
    snapshots = status.snapshot_refs(repo, config, dated=True)
    now = clock.now()
    tickets_dir = str(layout.tickets_dir)
    for record in records:
        state, detail = fleetstate.live_state(record)
        ticket_dir = os.path.join(tickets_dir, record.ticket)
        found, current = status.ticket_row(ticket_dir, record.ticket, stale_after, now)
        row = FleetRow.model_construct(
            ticket=record.ticket,
            state=state,
            plan=record.plan,
            attempt=record.attempt,
            max_attempts=max_attempts,
            worktree=record.worktree,
            branch=record.branch,
            next_attempt_at=record.next_attempt_at,
            pid=record.pid if state == "running" else None,
            last_exit=record.last_exit,
            last_reason=record.last_reason,
            detail=detail,
            updated=record.updated,
        )
        if found is not None:
            row.phase, row.task, row.total = found.phase, found.task, found.total
            row.run, row.run_state = found.run, found.state
            if found.state == "done" and row.task is None:
                row.task = row.total
        if current is not None and current.dispatch is not None:
            row.turn, row.max_turns = current.dispatch.turn, current.dispatch.max_turns
        snapshot = snapshots.get(record.ticket)
        if snapshot is not None:
            row.snapshot = snapshot[0][:SHORT_SHA]
            row.snapshot_age_seconds = max(0, int(now.timestamp()) - snapshot[1])
        if row.run is not None:
            _last_event(row, os.path.join(ticket_dir, row.run), now)
        report.rows.append(row)
    return report


def last_journal_event(run_dir: Path) -> tuple[str | None, datetime | None]:
    """The name and time of a run's last journal event; (None, None) when there is none or the
    journal cannot be read (the column stays empty; catchup names the problem)."""
    try:
        event: dict[str, Any] | None = journal.last(run_dir)
    except (OSError, ValueError, CairnError):
        return None, None
    if event is None:
        return None, None
    when = event.get("t")
    at = None
    if isinstance(when, str):
        try:
            at = datetime.fromisoformat(when)
        except ValueError:
            at = None
    return str(event.get("event")), at if at is not None and at.tzinfo is not None else None


def _last_event(row: FleetRow, run_dir: str, now: datetime) -> None:
    name, at = last_journal_event(Path(run_dir))
    if name is None:
        return
    row.last_event = name
    if at is not None:
        row.last_event_age_seconds = max(0, int((now - at).total_seconds()))

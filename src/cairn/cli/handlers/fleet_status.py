"""``cairn fleet status``: one row per fleet ticket, from the files (no supervisor needed)."""

from __future__ import annotations

import json as json_lib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.cli.output import console

if TYPE_CHECKING:
    from cairn.fleet.fleetstatus import FleetRow
from cairn.util.records import plain, pydantic_json

HEADER = ("ticket", "state", "phase", "task", "attempt", "turns", "snapshot", "worktree", "last")


def status(json: bool = False, workspace: Path = Path("."), engine: str | None = None) -> None:
    from cairn.cli.handlers.scale import _engine
    from cairn.fleet.fleetstatus import fleet_status
    from cairn.state.layout import discover

    found = discover(workspace)
    if _engine(engine, found[1].fleet.engine) == "temporal":  # the rows are the workflows'
        from cairn.cli.handlers import scale_status

        scale_status.status(json, workspace)
    report = fleet_status(workspace, found)
    for warning in report.warnings:  # on stderr: stdout stays the table or the JSON array
        sys.stderr.write(f"cairn: warning: {warning}\n")
    if json:
        from cairn.fleet.fleetstatus import refused_row

        rows = plain(report.rows, json_mode=True) + [refused_row(r) for r in report.refused]
        sys.stdout.write(pydantic_json(rows, indent=2) if rows else json_lib.dumps([]))
        sys.stdout.write("\n")
        return
    if not report.rows and not report.refused:
        console.print("no fleet tickets: `cairn fleet start` runs the plans in the queue")
        return
    from cairn.state.status import age_text

    table = [HEADER]
    for row in report.rows:
        task = "-"
        if row.task is not None or row.total is not None:
            task = f"{row.task if row.task is not None else '-'}/{row.total or '?'}"
        attempt = str(row.attempt)
        if row.max_attempts is not None:
            attempt += f"/{row.max_attempts}"
        turns = "-"
        if row.turn is not None:
            turns = f"{row.turn}/{row.max_turns if row.max_turns is not None else '?'}"
        snapshot = "-"
        if row.snapshot is not None:
            snapshot = f"{row.snapshot[:7]} {age_text(row.snapshot_age_seconds)}"
        last = "-"
        if row.last_event is not None:
            last = f"{row.last_event} {age_text(row.last_event_age_seconds)}"
        table.append(
            (
                row.ticket,
                row.state.replace("_", " "),
                row.phase or "-",
                task,
                attempt,
                turns,
                snapshot,
                row.worktree or "-",
                last,
            )
        )
    for refused in report.refused:  # what the tracker's last poll could not take, and why
        label = refused.ticket or refused.plan
        table.append((label, "refused", *"-" * (len(HEADER) - 2)))
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADER))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in table
    ]
    details = [f"  {row.ticket}: {note}" for row in report.rows if (note := _note(row))]
    details += [f"  {r.ticket or r.plan}: {r.reason}" for r in report.refused]
    sys.stdout.write("\n".join(lines + details) + "\n")


def _note(row: FleetRow) -> str | None:
    """The line under the table: the row's detail, and when a retrying ticket starts again."""
    parts = [row.detail] if row.detail else []
    if row.state == "retrying" and row.next_attempt_at is not None:
        from cairn.fleet.fleetstate import without_retry_time
        from cairn.state.status import age_text
        from cairn.util import clock

        parts = [part for part in [without_retry_time(row.detail)] if part]  # one retry time

        wait = int((row.next_attempt_at - clock.now()).total_seconds())
        parts.append(f"next attempt in {age_text(wait)}" if wait > 0 else "next attempt due")
    return "; ".join(parts) or None

"""STAND-IN (helper B): the minimal interface of the fleet's on-disk records from
/work/wt/fleet-brief.md, so the dir tracker and prune can be tested before helper C's module is
merged. The integrator keeps helper C's version of this file.

``<state root>/fleet/tickets/<ticket>.json``: one ``FleetTicket`` per ticket.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Literal

from cairn.state.layout import Layout
from cairn.util import durable
from cairn.util.records import Record

FleetState = Literal[
    "queued",
    "running",
    "retrying",
    "interrupted",
    "needs_review",
    "needs_input",
    "completed",
    "failed",
]


class FleetTicket(Record):
    ticket: str
    plan: str
    state: FleetState
    attempt: int = 0
    next_attempt_at: datetime | None = None
    worktree: str | None = None
    branch: str | None = None
    pid: int | None = None
    pid_started_at: float | None = None
    last_exit: int | None = None
    last_reason: str | None = None
    detail: str | None = None
    updated: datetime


def fleet_dir(layout: Layout) -> Path:
    return layout.root / "fleet"


def _path(layout: Layout, ticket: str) -> Path:
    return fleet_dir(layout) / "tickets" / f"{ticket}.json"


def read(layout: Layout, ticket: str) -> FleetTicket | None:
    data = durable.read_state_file(_path(layout, ticket), "fleet record")
    if data is None:
        return None
    return FleetTicket.model_validate(json.loads(data))


def write(layout: Layout, record: FleetTicket) -> None:
    path = _path(layout, record.ticket)
    durable.ensure_dir(path.parent)
    durable.atomic_write(path, json.dumps(record.model_dump(mode="json"), indent=2) + "\n")


def listing(layout: Layout) -> list[FleetTicket]:
    folder = fleet_dir(layout) / "tickets"
    if not folder.is_dir():
        return []
    found: list[FleetTicket] = []
    for path in sorted(folder.glob("*.json")):
        try:
            record = read(layout, path.stem)
        except (ValueError, OSError) as exc:
            sys.stderr.write(f"cairn: warning: skipped unreadable fleet record {path}: {exc}\n")
            continue
        if record is not None:
            found.append(record)
    return found

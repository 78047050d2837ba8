"""The fleet's on-disk records: one ``FleetTicket`` per ticket under ``<state root>/fleet/``.

STAND-IN (helper A, branch fleet-sup): the minimal interface of helper C's module, so the
supervisor can be tested before the merge; the integrator takes C's version.
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Literal

from cairn import tickets
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


class FleetTicket(Record, strict=True):
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
    return fleet_dir(layout) / "tickets" / f"{tickets.validate(ticket)}.json"


def read(layout: Layout, ticket: str) -> FleetTicket | None:
    data = durable.read_state_file(_path(layout, ticket), "fleet record")
    if data is None:
        return None
    return FleetTicket.model_validate_json(data)


def write(layout: Layout, record: FleetTicket) -> None:
    path = _path(layout, record.ticket)
    durable.ensure_dir(path.parent)
    durable.atomic_write(path, record.model_dump_json(indent=1) + "\n")


def listing(layout: Layout) -> list[FleetTicket]:
    directory = fleet_dir(layout) / "tickets"
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("*.json")):
        try:
            found.append(FleetTicket.model_validate_json(path.read_bytes()))
        except (OSError, ValueError) as exc:
            print(f"cairn: warning: skipped {path}: {exc}", file=sys.stderr)
    return sorted(found, key=lambda r: r.ticket)

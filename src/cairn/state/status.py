"""``cairn status``: one row per ticket that has a marker, a snapshot or a run.

Built for thousands of tickets: each ticket directory is listed once, its marker is read only
when the listing shows one, and a finished ticket costs one more listing (its latest run) and
one small read (the head of its change summary, for the status line). Snapshot refs come from
one ``for-each-ref``. Fleet tickets (``cairn.state.fleetstate``) carry their fleet state; a
repository without a fleet pays one failed directory listing for it.
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from cairn import tickets
from cairn.config import Config
from cairn.git import Repo
from cairn.state import accounting, fleetstate, marker, owner
from cairn.state.layout import (
    ARTIFACT,
    MARKER,
    RUN_ID,
    SUMMARY_ARTIFACT,
    SUMMARY_ROLE,
    discover,
    run_sort_key,
)
from cairn.state.marker import Marker, TicketState
from cairn.util import clock
from cairn.util.durations import parse_duration
from cairn.util.records import Record

HEAD_BYTES = 8192
_STATUS = re.compile(r"^## Status[ \t]*\r?\n(?:[ \t]*\r?\n)*([^\r\n]+)", re.MULTILINE)
_POSITION = re.compile(r"(?:task|finding) (\d+) of (\d+)")
_COUNT = re.compile(r"(\d+) of (\d+) (?:tasks|findings)")
_SUMMARY_SUFFIX = f"_{SUMMARY_ROLE}_{SUMMARY_ARTIFACT}.md"


class StatusRow(Record, frozen=False):
    ticket: str
    state: TicketState
    phase: str | None = None
    round: int | None = None
    task: int | None = None
    total: int | None = None
    age_seconds: int | None = None
    owner: str | None = None
    run: str | None = None
    snapshot: str | None = None
    usage: dict[str, Any] | None = None  # the run's tokens and cost (its summary's front matter)
    fleet: str | None = None  # the fleet state of a fleet ticket (queued, running, …)


def status(workspace: Path | str = ".") -> list[StatusRow]:
    repo, config, layout = discover(workspace)
    snapshots = {ticket: oid for ticket, (oid, _) in snapshot_refs(repo, config).items()}
    now = clock.now()
    stale_after = parse_duration(config.marker.stale_after)
    fleet = fleetstate.by_ticket(layout)
    rows = []
    tickets_dir = str(layout.tickets_dir)
    for ticket in sorted(set(layout.list_tickets()) | set(snapshots) | set(fleet)):
        row, _ = ticket_row(os.path.join(tickets_dir, ticket), ticket, stale_after, now)
        snapshot = snapshots.get(ticket)
        record = fleet.get(ticket)
        if row is None:
            if snapshot is None and record is None:
                continue
            row = StatusRow(ticket=ticket, state="none")
        if snapshot is not None:
            row.snapshot = snapshot
        if record is not None:
            row.fleet = fleetstate.live_state(record)[0]
        rows.append(row)
    return rows


def snapshot_refs(repo: Repo, config: Config, dated: bool = False) -> dict[str, tuple[str, int]]:
    """Each ticket's snapshot ref: its commit and (when ``dated``) its commit time, from one
    ``for-each-ref``; the time is 0 when not asked for."""
    prefix = config.snapshot.ref_prefix.rstrip("/") + "/"
    date = " %(committerdate:unix)" if dated else ""
    out = repo.git.out(["for-each-ref", f"--format=%(objectname){date} %(refname)", prefix])
    found = {}
    for line in out.splitlines():
        oid, _, rest = line.partition(" ")
        when = "0"
        if dated:
            when, _, rest = rest.partition(" ")
        name = rest[len(prefix) :]
        if tickets.problem(name) is None:
            found[name] = (oid, int(when) if when.isdigit() else 0)
    return found


Found = tuple[StatusRow | None, Marker | None]


def ticket_row(ticket_dir: str, ticket: str, stale_after: float, now: datetime) -> Found:
    """The status row of the ticket whose directory is ``ticket_dir``, and its marker."""
    try:
        names = os.listdir(ticket_dir)
    except (FileNotFoundError, NotADirectoryError):
        return None, None
    runs = [name for name in names if RUN_ID.fullmatch(name)]
    current = marker.read(Path(ticket_dir, MARKER)) if MARKER in names else None
    run_id = current.run if current is not None and current.run else None
    if run_id is None and runs:
        run_id = max(runs, key=run_sort_key)
    if current is None and run_id is None:
        return None, None
    line, mtime, usage = (
        _summary_head(os.path.join(ticket_dir, run_id)) if run_id else (None, None, None)
    )
    task = total = None
    if line is not None:
        position = _POSITION.search(line)
        count = _COUNT.search(line)
        if position:
            task, total = int(position.group(1)), int(position.group(2))
        elif count:
            total = int(count.group(2))
    if current is not None:
        state, _, _ = marker.judge(current, stale_after, now)
        row = StatusRow.model_construct(
            ticket=ticket,
            state=state,
            phase=current.phase,
            round=current.round,
            task=current.task if current.task is not None else task,
            total=total,
            age_seconds=max(0, int((now - current.last_updated).total_seconds())),
            owner=current.owner.describe() if current.owner else None,
            run=run_id,
            snapshot=None,
            usage=usage,
        )
        return row, current
    done = line is not None and line.startswith("Completed")
    row = StatusRow.model_construct(
        ticket=ticket,
        state="done" if done else "interrupted",
        phase="done" if done else None,
        task=task,
        total=total,
        age_seconds=None if mtime is None else max(0, int(now.timestamp() - mtime)),
        round=None,
        owner=None,
        run=run_id,
        snapshot=None,
        usage=usage,
    )
    return row, None


Head = tuple[str | None, float | None, dict[str, Any] | None]


def _summary_head(run_dir: str) -> Head:
    """The status line of the run's latest change summary, when it was written, and the
    run's usage its front matter records."""
    try:
        names = os.listdir(run_dir)
    except (FileNotFoundError, NotADirectoryError):
        return None, None, None
    summaries = [n for n in names if n.endswith(_SUMMARY_SUFFIX) and ARTIFACT.fullmatch(n)]
    if not summaries:
        return None, None, None
    latest = max(summaries, key=lambda n: int(n.split("_", 1)[0]))
    try:
        fd = os.open(os.path.join(run_dir, latest), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None, None, None
    try:
        head = os.read(fd, HEAD_BYTES).decode("utf-8", "replace")
        mtime = os.fstat(fd).st_mtime
    finally:
        os.close(fd)
    match = _STATUS.search(head)
    return (match.group(1).strip() if match else None), mtime, _usage(head)


def _usage(head: str) -> dict[str, Any] | None:
    """The ``usage`` mapping of a change summary's front matter, read the fast flat way."""
    from cairn.util.yaml_io import load_flat

    if not head.startswith("---\n"):
        return None
    end = head.find("\n---\n", 3)
    front = load_flat(head[4:end]) if end > 0 else None
    found = front.get("usage") if front else None
    return accounting.usage(found) if isinstance(found, dict) else None


def age_text(seconds: int | None) -> str:
    return "-" if seconds is None else owner.format_age(seconds)

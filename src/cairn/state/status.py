"""``cairn status``: one row per ticket that has a marker, a snapshot or a run.

Built for thousands of tickets: each ticket directory is listed once, its marker is read only
when the listing shows one, and a finished ticket costs one more listing (its latest run) and
one small read (the head of its change summary, for the status line); what was read is kept
(``cairn.state.rowcache``), so that from then on a ticket costs its ``stat`` calls: a settled
one (no marker) its row, one with a marker the marker and the status line, from which its row
is judged again at every call (its age, its owner's liveness). Snapshot refs come from
one ``for-each-ref``. Given ``fleet`` (``cairn.fleet.fleetstate.states``), fleet tickets carry
their fleet state; a repository without a fleet pays one failed directory listing for it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
from msgspec import Struct

from cairn import tickets
from cairn.config.records import Config
from cairn.git import Repo
from cairn.state import accounting, marker, owner
from cairn.state.layout import (
    ARTIFACT,
    MARKER,
    RUN_ID,
    SUMMARY_ARTIFACT,
    SUMMARY_ROLE,
    Layout,
    discover,
    run_sort_key,
)
from cairn.state.marker import Marker
from cairn.state.rowcache import StatCache, of, signature, status_cache
from cairn.terms import TicketState
from cairn.util import clock
from cairn.util.durations import parse_duration

HEAD_BYTES = 8192
_STATUS = re.compile(r"^## Status[ \t]*\r?\n(?:[ \t]*\r?\n)*([^\r\n]+)", re.MULTILINE)
_POSITION = re.compile(r"(?:task|finding) (\d+) of (\d+)")
_COUNT = re.compile(r"(\d+) of (\d+) (?:tasks|findings)")
_SUMMARY_SUFFIX = f"_{SUMMARY_ROLE}_{SUMMARY_ARTIFACT}.md"


# A run that stopped because its agent made no progress (reason no_progress) waits for a
# person: its row says needs_input, and why.
NEEDS_INPUT = "Interrupted — no_progress "


class StatusRow(Struct, kw_only=True):
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
    why: str | None = None  # needs_input: the blocker (the summary's status line detail)


def status(
    workspace: Path | str = ".",
    warnings: list[str] | None = None,
    fleet: Callable[[Layout, list[str]], Mapping[str, str]] | None = None,
) -> list[StatusRow]:
    """One row per ticket; ``warnings``: as ``discover``'s (a broken config: the defaults);
    ``fleet``: the fleet state of each fleet ticket of a state root (a ticket it names has a
    row, with its ``fleet`` column)."""
    warnings = warnings if warnings is not None else []
    repo, config, layout = discover(workspace, warnings)
    snapshots = {ticket: oid for ticket, (oid, _) in snapshot_refs(repo, config).items()}
    now = clock.now()
    stale_after = parse_duration(config.marker.stale_after)
    fleet_states = fleet(layout, warnings) if fleet is not None else {}
    rows = []
    tickets_dir = str(layout.tickets_dir)
    cache = status_cache(str(layout.root), tickets_dir)
    for ticket in sorted(set(layout.list_tickets()) | set(snapshots) | set(fleet_states)):
        row, _ = ticket_row(f"{tickets_dir}/{ticket}", ticket, stale_after, now, cache)
        snapshot = snapshots.get(ticket)
        state = fleet_states.get(ticket)
        if row is None:
            if snapshot is None and state is None:
                continue
            row = StatusRow(ticket=ticket, state="none")
        if snapshot is not None:
            row.snapshot = snapshot
        if state is not None:
            row.fleet = state
        rows.append(row)
    cache.save()
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


def ticket_row(
    ticket_dir: str,
    ticket: str,
    stale_after: float,
    now: datetime,
    rows: StatCache | None = None,
) -> Found:
    """The status row of the ticket whose directory is ``ticket_dir``, and its marker; from
    ``rows`` (paths relative to the tickets directory) when its ``stat`` calls say nothing
    changed, what was read for it: a settled ticket's row, or a marker (as its record's
    builtins) with its run's status line, the row then judged again (its age, its owner's
    liveness)."""
    if rows is not None:
        hit = _cached(rows, ticket)
        if hit is not None:
            run_id, line, usage, mtime, kept = hit
            if kept is not None:
                return _marker_row(ticket, kept, run_id, line, usage, stale_after, now), kept
            if run_id is None:
                return None, None
            return _settled_row(ticket, run_id, line, mtime, usage, now), None
    try:
        dir_stat = os.stat(ticket_dir) if rows is not None else None  # before the listing
        names = os.listdir(ticket_dir)
    except (FileNotFoundError, NotADirectoryError):
        return None, None
    runs = [name for name in names if RUN_ID.fullmatch(name)]
    current = marker_signature = None
    if MARKER in names:
        marker_path = os.path.join(ticket_dir, MARKER)
        marker_signature = signature(marker_path) if rows is not None else None  # before the read
        current = marker.read(Path(marker_path))
    run_id = current.run if current is not None and current.run else None
    if run_id is None and runs:
        run_id = max(runs, key=run_sort_key)
    if current is None and run_id is None:
        if rows is not None and dir_stat is not None:
            rows.put(ticket, [ticket], [of(dir_stat)], [None, None, None, None, None])
        return None, None
    head = _summary_head(os.path.join(ticket_dir, run_id), rows is not None) if run_id else None
    line, summary_stat, usage = (head.line, head.stat, head.usage) if head else (None, None, None)
    mtime = summary_stat.st_mtime if summary_stat is not None else None
    if current is None:
        assert run_id is not None
        if rows is not None and dir_stat is not None and head is not None and head.settled:
            assert head.run_stat is not None
            paths, signatures = [ticket, f"{ticket}/{run_id}"], [of(dir_stat), of(head.run_stat)]
            if head.name is not None and summary_stat is not None:
                paths.append(f"{ticket}/{run_id}/{head.name}")
                signatures.append(of(summary_stat))
            rows.put(ticket, paths, signatures, [run_id, line, usage, mtime, None])
        return _settled_row(ticket, run_id, line, mtime, usage, now), None
    if rows is not None and dir_stat is not None and marker_signature is not None:
        paths, signatures = [ticket, f"{ticket}/{MARKER}"], [of(dir_stat), marker_signature]
        if head is not None and head.run_stat is not None and head.settled:
            paths.append(f"{ticket}/{run_id}")
            signatures.append(of(head.run_stat))
            if head.name is not None and summary_stat is not None:
                paths.append(f"{ticket}/{run_id}/{head.name}")
                signatures.append(of(summary_stat))
        if head is None or head.settled:
            kept = msgspec.to_builtins(current)
            rows.put(ticket, paths, signatures, [run_id, line, usage, mtime, kept])
    return _marker_row(ticket, current, run_id, line, usage, stale_after, now), current


def _cached(
    rows: StatCache, ticket: str
) -> tuple[str | None, str | None, dict[str, Any] | None, float | None, Marker | None] | None:
    """What ``rows`` keeps for ``ticket``, its marker as the record; None when nothing is kept
    or what is kept is not in shape."""
    hit = rows.get(ticket)
    if hit is None:
        return None
    try:
        run_id, line, usage, mtime, kept = hit
        current = None if kept is None else msgspec.convert(kept, Marker, strict=False)
    except (TypeError, ValueError):  # msgspec.ValidationError is a ValueError
        return None
    return run_id, line, usage, mtime, current


def _marker_row(
    ticket: str,
    current: Marker,
    run_id: str | None,
    line: str | None,
    usage: dict[str, Any] | None,
    stale_after: float,
    now: datetime,
) -> StatusRow:
    """The row of a ticket with a marker, judged now."""
    task = total = None
    if line is not None:
        task, total = _position(line)
    state, _, _ = marker.judge(current, stale_after, now)
    needs = state == "interrupted" and line is not None and line.startswith(NEEDS_INPUT)
    return StatusRow(
        ticket=ticket,
        state="needs_input" if needs else state,
        why=_detail(line) if needs else None,
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


def _detail(line: str | None) -> str | None:
    """The detail of an interrupted summary's status line (``Interrupted — <reason> <where>;
    <saved>; <detail>``)."""
    parts = (line or "").split("; ", 2)
    return parts[2] if len(parts) == 3 else None


def _position(line: str) -> tuple[int | None, int | None]:
    """(task, total) of a status line: ``… task 2 of 5 …`` or ``… 3 of 5 tasks``."""
    position = _POSITION.search(line)
    if position:
        return int(position.group(1)), int(position.group(2))
    count = _COUNT.search(line)
    if count:
        return None, int(count.group(2))
    return None, None


def _settled_row(
    ticket: str,
    run_id: str,
    line: str | None,
    mtime: float | None,
    usage: dict[str, Any] | None,
    now: datetime,
) -> StatusRow:
    """The row of a ticket with no marker: done or interrupted, as its last summary says."""
    task, total = _position(line) if line is not None else (None, None)
    done = line is not None and line.startswith("Completed")
    return StatusRow(
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


class Head(NamedTuple):
    """The head of a run's latest change summary: its status line, ``fstat`` and usage; its
    name, and the run directory's ``stat`` taken before it was listed (when asked for)."""

    line: str | None
    stat: os.stat_result | None
    usage: dict[str, Any] | None
    name: str | None
    run_stat: os.stat_result | None

    @property
    def settled(self) -> bool:
        """Whether what was found can be cached: nothing failed to be read."""
        return self.run_stat is not None and (self.name is None or self.stat is not None)


def run_usage(run_dir: str) -> dict[str, Any] | None:
    """What a run used, as its latest change summary's front matter records it (every session
    of the run); None before its first dispatch ended, or when the agent reported nothing."""
    return _summary_head(run_dir).usage


def _summary_head(run_dir: str, with_stat: bool = False) -> Head:
    """The status line of the run's latest change summary, its ``fstat``, and the run's usage
    its front matter records."""
    try:
        run_stat = os.stat(run_dir) if with_stat else None
        names = os.listdir(run_dir)
    except (FileNotFoundError, NotADirectoryError):
        return Head(None, None, None, None, None)
    summaries = [n for n in names if n.endswith(_SUMMARY_SUFFIX) and ARTIFACT.fullmatch(n)]
    if not summaries:
        return Head(None, None, None, None, run_stat)
    latest = max(summaries, key=lambda n: int(n.split("_", 1)[0]))
    try:
        fd = os.open(os.path.join(run_dir, latest), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return Head(None, None, None, latest, None)
    try:
        head = os.read(fd, HEAD_BYTES).decode("utf-8", "replace")
        stat = os.fstat(fd)
    finally:
        os.close(fd)
    match = _STATUS.search(head)
    line = match.group(1).strip() if match else None
    return Head(line, stat, _usage(head), latest, run_stat)


def _usage(head: str) -> dict[str, Any] | None:
    """The ``usage`` mapping of a change summary's front matter (None when it has none, or the
    front matter is not YAML: the summary's own reader reports that). A top-level ``usage`` key
    is found by its line: ``  "usage":`` in the JSON cairn writes, ``usage:`` in YAML by hand."""
    from cairn.util import yaml_io

    if not head.startswith("---\n"):
        return None
    end = head.find("\n---\n", 3)
    if end < 0 or ('\n  "usage":' not in head[3:end] and "\nusage:" not in head[3:end]):
        return None  # no top-level usage key: nothing to parse
    try:
        front = yaml_io.safe_load(head[4:end])
    except yaml_io.YAMLError:
        return None
    found = front.get("usage") if isinstance(front, dict) else None
    return accounting.usage(found) if isinstance(found, dict) else None


def age_text(seconds: int | None) -> str:
    return "-" if seconds is None else owner.format_age(seconds)

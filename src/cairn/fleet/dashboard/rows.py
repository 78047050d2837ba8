"""The dashboard's ticket rows: ``cairn fleet status --json``'s rows, read again only when
their files changed.

A row joins a ticket's fleet record, its marker, the head of its latest change summary and the
last event of its journal (``fleet.fleetstatus``). Reading and parsing those is most of the cost
of a row, so each ticket keeps what was read under the stat signature (mtime, size, inode) of
every file and directory it came from; a request stats them (five per ticket) and reads again
only what changed. What depends on the clock (a live pid, a marker's staleness, ages) is judged
again on every request.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cairn import tickets
from cairn.config import Config
from cairn.errors import BadInput
from cairn.fleet import fleetstate, refusals
from cairn.fleet.fleetstatus import SHORT_SHA, FleetRow, last_journal_event, refused_row
from cairn.git import Repo
from cairn.git.sessions import Started
from cairn.state import marker, status
from cairn.state.layout import JOURNAL, Layout
from cairn.state.marker import Marker
from cairn.state.status import StatusRow
from cairn.util import clock
from cairn.util.durations import parse_duration
from cairn.util.records import plain

Signature = tuple[int, int, int] | None


def _signature(path: str) -> Signature:
    try:
        found = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (found.st_mtime_ns, found.st_size, found.st_ino)


@dataclass
class _Read:
    """What the files of one ticket said when they had ``key`` for signatures."""

    key: tuple[Signature, ...]
    record: fleetstate.FleetTicket | None
    found: StatusRow | None
    current: Marker | None
    last_event: str | None
    last_event_at: datetime | None
    warning: str | None
    base: dict[str, Any] | None = None  # the row's JSON without what the clock changes


class RowCache:
    """The rows of one repository's fleet tickets; safe to share between request threads."""

    def __init__(self, repo: Repo, config: Config, layout: Layout) -> None:
        self.repo, self.config, self.layout = repo, config, layout
        self.stale_after = parse_duration(config.marker.stale_after)
        self.max_attempts: int | None = getattr(config.fleet, "max_attempts", None)
        self.lock = threading.Lock()
        self.reads: dict[str, _Read] = {}
        self.refused: tuple[Signature, list[dict[str, Any]], list[str]] | None = None

    def rows(self) -> tuple[list[dict[str, Any]], list[str]]:
        """Every fleet ticket's row as JSON-ready dicts (``fleet status --json`` plus ``usage``,
        and ``last_error`` for retrying rows), and the warnings for records that were skipped."""
        now = clock.now()
        refs = self._start_refs()  # git lists the snapshot refs while the files are stated
        names = self.layout.list_fleet_tickets()
        rows: list[dict[str, Any]] = []
        try:
            with self.lock:
                for gone in set(self.reads) - set(names):
                    del self.reads[gone]
                dirs = self._dirs()
                reads = [self._read(ticket, now, dirs) for ticket in names]
        except BaseException:
            refs.result(check=False)  # reaped, whatever went wrong
            raise
        warnings = [read.warning for read in reads if read.warning is not None]
        snapshots = _snapshot_refs(self.config, refs)
        for i, read in enumerate(reads):
            if read.record is not None:
                rows.append(self._row(read, read.record, snapshots.get(names[i]), now))
        rows += self._refused(warnings)
        return rows, warnings

    def _refused(self, warnings: list[str]) -> list[dict[str, Any]]:
        """The rows of the entries the tracker's last poll refused (read again when the
        listing changed)."""
        key = _signature(str(refusals.path_of(self.layout)))
        with self.lock:
            if self.refused is None or self.refused[0] != key:
                said: list[str] = []
                found = [refused_row(r) for r in refusals.read(self.layout, said)]
                self.refused = (key, found, said)
            _, found, said = self.refused
        warnings += said
        return [dict(row) for row in found]

    def _start_refs(self) -> Started:
        prefix = self.config.snapshot.ref_prefix.rstrip("/") + "/"
        fmt = "--format=%(objectname) %(committerdate:unix) %(refname)"
        return self.repo.git.start(["for-each-ref", fmt, prefix])

    def row(self, ticket: str) -> dict[str, Any] | None:
        """One ticket's row; None when it has no fleet record."""
        now = clock.now()
        snapshots = status.snapshot_refs(self.repo, self.config, dated=True)
        with self.lock:
            read = self._read(ticket, now, self._dirs())
        if read.record is None:
            return None
        return self._row(read, read.record, snapshots.get(ticket), now)

    # --- reading -------------------------------------------------------------------------------

    def _dirs(self) -> tuple[str, str]:
        """The runs' tickets directory and the fleet records' directory, each checked once."""
        return str(self.layout.tickets_dir) + os.sep, str(self.layout.fleet_tickets_dir)

    @staticmethod
    def _paths(ticket: str, run: str | None, dirs: tuple[str, str]) -> list[str]:
        # the marker and the change summaries are replaced by renames, which the directories'
        # signatures show; the journal is appended to, so it is stated itself
        ticket_dir = dirs[0] + ticket
        paths = [f"{dirs[1]}{os.sep}{ticket}{fleetstate.SUFFIX}", ticket_dir]
        if run is not None:
            paths += [f"{ticket_dir}{os.sep}{run}", f"{ticket_dir}{os.sep}{run}{os.sep}{JOURNAL}"]
        return paths

    def _read(self, ticket: str, now: datetime, dirs: tuple[str, str]) -> _Read:
        known = self.reads.get(ticket)
        run = known.found.run if known is not None and known.found is not None else None
        key = tuple(_signature(p) for p in self._paths(ticket, run, dirs))
        if known is not None and known.key == key:
            return known
        fresh = self._load(ticket, key, now, dirs)
        fresh_run = fresh.found.run if fresh.found is not None else None
        if fresh_run != run and fresh_run is not None:
            # the new run's files, stated after the read: a write to them in between is seen
            # at their next change (a running ticket's journal changes often, a finished one's
            # record changed last)
            fresh.key = key[:2] + tuple(
                _signature(p) for p in self._paths(ticket, fresh_run, dirs)[2:]
            )
        self.reads[ticket] = fresh
        return fresh

    def _load(
        self, ticket: str, key: tuple[Signature, ...], now: datetime, dirs: tuple[str, str]
    ) -> _Read:
        read = _Read(key, None, None, None, None, None, None)
        path = Path(self._paths(ticket, None, dirs)[0])
        if tickets.problem(ticket) is not None:
            read.warning = f"{fleetstate.WHAT} {path} is not named after a valid ticket id; skipped"
            return read
        try:
            record = fleetstate.load(path)
        except (BadInput, OSError) as exc:  # as fleetstate.listing words it
            message = str(exc) if isinstance(exc, BadInput) else f"{path}: {exc.strerror}"
            read.warning = f"{message}; skipped"
            return read
        if record is None:
            return read
        read.record = record
        ticket_dir = dirs[0] + ticket
        read.found, read.current = status.ticket_row(ticket_dir, ticket, self.stale_after, now)
        if read.found is not None and read.found.run is not None:
            _last_event(read, Path(ticket_dir, read.found.run))
        read.base = self._base(read, record)
        return read

    # --- the row -------------------------------------------------------------------------------

    def _base(self, read: _Read, record: fleetstate.FleetTicket) -> dict[str, Any]:
        row = FleetRow.model_construct(
            ticket=record.ticket,
            state=record.state,
            plan=record.plan,
            attempt=record.attempt,
            max_attempts=self.max_attempts,
            worktree=record.worktree,
            branch=record.branch,
            next_attempt_at=record.next_attempt_at,
            pid=None,
            last_exit=record.last_exit,
            last_reason=record.last_reason,
            detail=record.detail,
            updated=record.updated,
        )
        found, current = read.found, read.current
        if found is not None:
            row.phase, row.task, row.total = found.phase, found.task, found.total
            row.run, row.run_state = found.run, found.state
            if found.state == "done" and row.task is None:
                row.task = row.total
        if current is not None and current.dispatch is not None:
            row.turn, row.max_turns = current.dispatch.turn, current.dispatch.max_turns
        row.last_event = read.last_event
        base: dict[str, Any] = plain(row, json_mode=True)
        base["usage"] = found.usage if found is not None else None
        return base

    def _row(
        self,
        read: _Read,
        record: fleetstate.FleetTicket,
        snapshot: tuple[str, int] | None,
        now: datetime,
    ) -> dict[str, Any]:
        """``read.base`` with what the clock changes: the state of a record whose process may
        be gone, the marker's liveness, the ages."""
        assert read.base is not None
        row = dict(read.base)
        state, detail = fleetstate.live_state(record)
        row["state"], row["detail"] = state, detail
        row["pid"] = record.pid if state == "running" else None
        if read.current is not None:
            row["run_state"] = marker.judge(read.current, self.stale_after, now)[0]
        if snapshot is not None:
            row["snapshot"] = snapshot[0][:SHORT_SHA]
            row["snapshot_age_seconds"] = max(0, int(now.timestamp()) - snapshot[1])
        if read.last_event_at is not None:
            age = int((now - read.last_event_at).total_seconds())
            row["last_event_age_seconds"] = max(0, age)
        if state == "retrying":  # the page shows the retry time live, from next_attempt_at
            row["last_error"] = fleetstate.without_retry_time(detail)
        return row


def _last_event(read: _Read, run_dir: Path) -> None:
    name, at = last_journal_event(run_dir)
    if name is not None:
        read.last_event, read.last_event_at = name, at


def _snapshot_refs(config: Config, started: Started) -> dict[str, tuple[str, int]]:
    """Each ticket's snapshot commit and its time, as ``status.snapshot_refs(dated=True)``."""
    prefix = config.snapshot.ref_prefix.rstrip("/") + "/"
    found = {}
    for line in started.result().text.splitlines():
        parts = line.split(" ", 2)
        if len(parts) != 3:
            continue
        oid, when, name = parts[0], parts[1], parts[2][len(prefix) :]
        if tickets.problem(name) is None:
            found[name] = (oid, int(when) if when.isdigit() else 0)
    return found

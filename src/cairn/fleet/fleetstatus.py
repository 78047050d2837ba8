"""``cairn fleet status`` and the dashboard's rows: one row per fleet ticket, from the files
alone (no supervisor needed), built in one place (``FleetRows``).

A row joins the ticket's fleet record (``fleetstate``) with what ``cairn status`` reads of its
run (``status.ticket_row``: marker, latest run, the head of its change summary), the last event
of the run's journal (its tail only) and the ticket's snapshot ref (one dated ``for-each-ref``
for all tickets). Reading and parsing those is most of the cost of a row, so a long-lived
``FleetRows`` (the dashboard's) keeps what was read under the stat signature (mtime, size,
inode) of every file and directory it came from; a request stats them (five per ticket) and
reads again only what changed. What depends on the clock (a live pid, a marker's staleness,
ages) is judged again on every request.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import Struct

from cairn import tickets
from cairn.errors import BadInput, CairnError
from cairn.fleet import fleetstate, outbox, refusals
from cairn.state import journal, marker, status
from cairn.state.layout import JOURNAL, Layout, discover
from cairn.state.rowcache import Signature, StatCache, signature
from cairn.terms import CONTROL_ACTIONS, FleetState
from cairn.util import clock
from cairn.util.durations import parse_duration

if TYPE_CHECKING:
    from collections.abc import Callable

    from cairn.config.records import Config
    from cairn.git import Repo
    from cairn.git.process import Started
    from cairn.state.marker import Marker
    from cairn.state.status import StatusRow
    from cairn.terms import FleetAction

    # The dashboard's rule for its buttons: None when the action changes the record's ticket.
    WhyNot = Callable[[FleetAction, fleetstate.FleetTicket, Config], str | None]

SHORT_SHA = 10
# Keys of a dashboard row that ``cairn fleet status --json`` does not have.
DASHBOARD_ONLY = ("usage", "last_error", "actions")


class FleetRow(Struct, kw_only=True):
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
    held: list[dict[str, Any]] | None = None  # a waiting ticket's: the agents at a limit now


def held_now(
    layout: Layout, now: datetime, warnings: list[str] | None = None
) -> list[dict[str, Any]]:
    """The agents at a usage or rate limit now (``state.limited``), the soonest reset first:
    each's name, kind, limit and reset (``reset_known`` False: cairn's guess); a limit record
    that cannot be read is a line in ``warnings``."""
    from cairn.state import limited

    return [
        {
            "agent": held.agent,
            "kind": held.kind,
            "limit": held.limit,
            "resets_at": held.resets_at.isoformat(),
            "reset_known": held.reset_known,
        }
        for held in limited.all_held(layout, now, warnings)
    ]


def refused_row(refusal: refusals.Refusal) -> dict[str, Any]:
    """A refused entry as a ticket's row: ``state`` ``refused``, ``plan`` the entry, ``detail``
    why and the fix, ``ticket`` the id it would have (null when it names none)."""
    row: dict[str, Any] = dict.fromkeys(FleetRow.__struct_fields__)
    row.update(
        ticket=refusal.ticket,
        state=refusals.REFUSED,
        plan=refusal.plan,
        attempt=0,
        detail=refusal.reason,
        updated=msgspec.to_builtins(refusal.since),
    )
    return row


def fleet_status(
    workspace: Path | str = ".", discovered: tuple[Repo, Config, Layout] | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of ``cairn fleet status --json`` of the repository at ``workspace``
    (``discovered``: it, already read): every fleet ticket's, then the refused entries'; and
    the warnings for what could not be read."""
    rows, warnings = (found := FleetRows(*(discovered or discover(workspace)))).rows()
    outbox.annotate(found.layout, rows)  # what the tracker and the webhooks are still to hear
    for row in rows:
        for key in DASHBOARD_ONLY:
            row.pop(key, None)
    return rows, warnings


# A file changed this recently (a timestamp tick's margin) is read again at the next request.
RACY_NS = 50_000_000


@dataclass
class _Read:
    """What the files of one ticket said."""

    record: fleetstate.FleetTicket | None
    found: StatusRow | None
    current: Marker | None
    last_event: str | None
    last_event_at: datetime | None
    warning: str | None
    base: dict[str, Any] | None = None  # the row's JSON without what the clock changes


class FleetRows:
    """The rows of one repository's fleet tickets; safe to share between request threads."""

    def __init__(
        self,
        repo: Repo,
        config: Config,
        layout: Layout,
        why_not: WhyNot | None = None,
    ) -> None:
        """``why_not`` (the dashboard's: ``control.why_not``) gives each row the ``actions``
        that change its ticket, its buttons."""
        self.repo, self.config, self.layout = repo, config, layout
        self.why_not = why_not
        self.stale_after = parse_duration(config.marker.stale_after)
        self.max_attempts: int | None = getattr(config.fleet, "max_attempts", None)
        self.lock = threading.Lock()
        self.reads = StatCache(str(layout.root), racy_ns=RACY_NS)
        self.refused: tuple[Signature, list[dict[str, Any]], list[str]] | None = None
        self.actions: dict[tuple[str, int], list[str]] = {}  # (state, attempt) → the buttons

    def rows(self) -> tuple[list[dict[str, Any]], list[str]]:
        """Every fleet ticket's row as JSON-ready dicts (``fleet status --json`` plus ``usage``,
        and ``last_error`` for retrying rows), and the warnings for records that were skipped."""
        now = clock.now()
        refs = self._start_refs()  # git lists the snapshot refs while the files are stated
        rows: list[dict[str, Any]] = []
        try:
            names = self.layout.list_fleet_tickets()
            with self.lock:
                self.reads.retain(names)
                dirs = self._dirs()
                reads = [self._read(ticket, now, dirs) for ticket in names]
        except BaseException:
            refs.result(check=False)  # reaped, whatever went wrong
            raise
        warnings = [read.warning for read in reads if read.warning is not None]
        snapshots = _snapshot_refs(self.config, refs)
        held = held_now(self.layout, now, warnings) if any(_waits(r) for r in reads) else []
        for i, read in enumerate(reads):
            if read.record is not None:
                rows.append(self._row(read, read.record, snapshots.get(names[i]), now, held))
        rows += self._refused(warnings)
        return rows, warnings

    def _refused(self, warnings: list[str]) -> list[dict[str, Any]]:
        """The rows of the entries the tracker's last poll refused (read again when the
        listing changed)."""
        key = signature(str(refusals.path_of(self.layout)))
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
        held = held_now(self.layout, now) if _waits(read) else []
        return self._row(read, read.record, snapshots.get(ticket), now, held)

    # --- reading -------------------------------------------------------------------------------

    def _dirs(self) -> tuple[str, str]:
        """Where the runs' tickets directory and the fleet records' directory are, relative to
        the state root, each checked once."""
        root = self.layout.root
        return (
            os.path.relpath(self.layout.tickets_dir, root) + os.sep,
            os.path.relpath(self.layout.fleet_tickets_dir, root) + os.sep,
        )

    @staticmethod
    def _paths(ticket: str, run: str | None, dirs: tuple[str, str]) -> list[str]:
        # the marker and the change summaries are replaced by renames, which the directories'
        # signatures show; the journal is appended to, so it is stated itself
        ticket_dir = dirs[0] + ticket
        paths = [f"{dirs[1]}{ticket}{fleetstate.SUFFIX}", ticket_dir]
        if run is not None:
            paths += [f"{ticket_dir}{os.sep}{run}", f"{ticket_dir}{os.sep}{run}{os.sep}{JOURNAL}"]
        return paths

    def _read(self, ticket: str, now: datetime, dirs: tuple[str, str]) -> _Read:
        known: _Read | None = self.reads.get(ticket)
        if known is not None:
            return known
        root = self.reads.root
        paths = self._paths(ticket, None, dirs)
        signatures = [signature(root + p) for p in paths]  # before the read
        fresh = self._load(ticket, root + paths[0], root + paths[1], now)
        run = fresh.found.run if fresh.found is not None else None
        if run is not None:
            # the run's files, stated after the read: a write to them in between is seen at
            # their next change (a running ticket's journal changes often)
            paths = self._paths(ticket, run, dirs)
            signatures += [signature(root + p) for p in paths[2:]]
        self.reads.put(ticket, paths, signatures, fresh)
        return fresh

    def _load(self, ticket: str, record_path: str, ticket_dir: str, now: datetime) -> _Read:
        read = _Read(None, None, None, None, None, None)
        path = Path(record_path)
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
        read.found, read.current = status.ticket_row(ticket_dir, ticket, self.stale_after, now)
        if read.found is not None and read.found.run is not None:
            _last_event(read, Path(ticket_dir, read.found.run))
        read.base = self._base(read, record)
        return read

    # --- the row -------------------------------------------------------------------------------

    def _base(self, read: _Read, record: fleetstate.FleetTicket) -> dict[str, Any]:
        row = FleetRow(
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
        base: dict[str, Any] = msgspec.to_builtins(row)
        base["usage"] = found.usage if found is not None else None
        return base

    def _row(
        self,
        read: _Read,
        record: fleetstate.FleetTicket,
        snapshot: tuple[str, int] | None,
        now: datetime,
        held: list[dict[str, Any]],
    ) -> dict[str, Any]:
        """``read.base`` with what the clock changes: the state of a record whose process may
        be gone, the marker's liveness, the ages, a waiting ticket's agents at a limit now
        (``held``)."""
        assert read.base is not None
        row = dict(read.base)
        state, detail = fleetstate.live_state(record)
        row["state"], row["detail"] = state, detail
        row["pid"] = record.pid if state == "running" else None
        if read.current is not None and row["run_state"] != "needs_input":
            row["run_state"] = marker.judge(read.current, self.stale_after, now)[0]
        if snapshot is not None:
            row["snapshot"] = snapshot[0][:SHORT_SHA]
            row["snapshot_age_seconds"] = max(0, int(now.timestamp()) - snapshot[1])
        if read.last_event_at is not None:
            age = int((now - read.last_event_at).total_seconds())
            row["last_event_age_seconds"] = max(0, age)
        if state == "retrying":  # the page shows the retry time live, from next_attempt_at
            row["last_error"] = fleetstate.without_retry_time(detail)
        if state == "waiting":
            row["held"] = [dict(h) for h in held]
        if self.why_not is not None:
            row["actions"] = self._actions(self.why_not, record, state)
        return row

    def _actions(
        self, why_not: WhyNot, record: fleetstate.FleetTicket, state: FleetState
    ) -> list[str]:
        """The actions that change the ticket (its dashboard buttons), which its state and, for
        one interrupted, its attempts decide: worked out once per pair."""
        key = (state, record.attempt)
        found = self.actions.get(key)
        if found is None:
            as_now = (
                record if record.state == state else msgspec.structs.replace(record, state=state)
            )
            found = [a for a in CONTROL_ACTIONS if why_not(a, as_now, self.config) is None]
            self.actions[key] = found
        return list(found)


def _waits(read: _Read) -> bool:
    return read.record is not None and read.record.state == "waiting"


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

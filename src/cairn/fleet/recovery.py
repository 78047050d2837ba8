"""What a supervisor finds of the fleet before it goes on: the runs a killed supervisor left
(adopted, or resumed first) and fleet records that cannot be read (set aside and made again
from the ticket's run, so one damaged ticket stops only itself).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from cairn import tickets
from cairn.config.records import Config
from cairn.fleet import fleetstate
from cairn.fleet.endings import Endings
from cairn.fleet.fleetstate import FleetTicket
from cairn.fleet.watch import Adopted, Watched, outcome_on_disk
from cairn.git import Repo
from cairn.state import journal, marker, owner
from cairn.state.layout import Layout
from cairn.terms import finished
from cairn.util import clock


class Found(NamedTuple):
    records: dict[str, FleetTicket]
    adopted: dict[str, Adopted]  # runs still alive, or ended with an outcome nobody read yet
    dead: list[FleetTicket]  # runs killed with their supervisor: resumed first
    warnings: list[tuple[str | None, str]]  # (ticket, one line) for what was set right
    skipped: set[str]  # record files that cannot be any ticket's: said once


def scan(layout: Layout, config: Config, toplevel: Path) -> Found:
    found = Found({}, {}, [], [], set())
    for name, record, problem in fleetstate.scan(layout):
        if problem is not None:
            record = mend(layout, config, toplevel, name, problem, found.warnings)
            if record is None:
                found.skipped.add(name)
        if record is None:
            continue
        found.records[record.ticket] = record
        if record.state != "running":
            continue
        if record.pid is not None:
            child = Adopted(
                record.ticket,
                layout,
                record.pid,
                record.pid_started_at,
                record.pid_started_since_boot,
            )
            # a run the disk stopped while no record could be written is resumed first, its
            # attempt not spent (as the full disk's rule says), not judged now there is room
            full = child.outcome is not None and child.outcome.get("reason") == "disk_full"
            if child.alive() or (child.ended_with_outcome() and not full):
                found.adopted[record.ticket] = child
                continue
        found.dead.append(record)
    return found


def mend(
    layout: Layout,
    config: Config,
    toplevel: Path,
    name: str,
    problem: str,
    warnings: list[tuple[str | None, str]],
    known: FleetTicket | None = None,
) -> FleetTicket | None:
    """An unreadable record: set aside and written again — from ``known`` (what this
    supervisor holds), else from the ticket's run (None when it has none yet: the tracker
    queues it anew). A file that cannot be any ticket's record is only reported."""
    if tickets.problem(name) is not None:
        warnings.append((None, f"{problem}; skipped"))
        return None
    try:
        aside = fleetstate.set_aside(layout, name)
    except OSError as exc:
        warnings.append((name, f"{problem}; it cannot be moved aside ({exc.strerror}); skipped"))
        return None
    record = known or from_run(layout, config, toplevel, name)
    why = problem.partition("; ")[0]  # its fix ("delete it") is what is done here instead
    said = f"its fleet record could not be read ({why}); moved it to {aside.name}"
    if record is None:
        warnings.append((name, f"{said}; it has no run yet, so it is queued anew"))
        return None
    detail = f"{said} and made it again from {'memory' if known else 'its run'}"
    record = msgspec.structs.replace(record, detail=detail, updated=clock.now())
    fleetstate.write(layout, record)
    warnings.append((name, detail))
    return record


def from_run(layout: Layout, config: Config, toplevel: Path, ticket: str) -> FleetTicket | None:
    """A ticket's fleet record as its latest run tells it: running (its owner is alive),
    completed, needs review, or retrying (resumed next); its attempts are the run's starts,
    with at least one attempt left."""
    status, reason = outcome_on_disk(layout, ticket)
    run_id = layout.latest_run(ticket)
    if status == "none" or run_id is None:
        return None
    events, _ = journal.read(layout.run_dir(ticket, run_id))
    starts = [e for e in events if e.get("event") == "run_started"]
    plan = str(starts[0].get("plan") or "") if starts else ""
    max_attempts = config.fleet.max_attempts
    with contextlib.suppress(ValueError):
        plan = str(Path(plan).relative_to(toplevel))
    fields: dict[str, object] = {
        "ticket": ticket,
        "plan": plan,
        "attempt": len(starts) if finished(status) else min(len(starts), max_attempts - 1),
        "state": status if finished(status) else "retrying",
        "last_reason": None if finished(status) else reason or "crash",
        "last_exit": {"completed": 0, "needs_review": 1}.get(status),
        "updated": clock.now(),
    }
    live = _live_owner(layout, ticket)
    if live is not None and not finished(status):
        fields.update(
            state="running",
            pid=live.pid,
            pid_started_at=live.pid_started_at,
            pid_started_since_boot=live.pid_started_since_boot,
        )
    return msgspec.convert(fields, FleetTicket, strict=False)


class _Live(NamedTuple):
    pid: int
    pid_started_at: float | None
    pid_started_since_boot: float | None


def _live_owner(layout: Layout, ticket: str) -> _Live | None:
    """The process running the ticket now on this host, by its marker."""
    with contextlib.suppress(Exception):  # no marker, or one that cannot be read: nobody
        current = marker.read(layout.marker_path(ticket))
        if current is None or current.owner is None:
            return None
        now = clock.now()
        if owner.check(current.owner, now, 0, now)[0] == "alive":
            run = current.owner
            started = run.pid_started_at.timestamp() if run.pid_started_at else None
            return _Live(run.pid, started, run.pid_started_since_boot)
    return None


class Recovering:
    """The supervisor's part that sets right what it finds (``Supervisor`` is one)."""

    repo: Repo
    config: Config
    layout: Layout
    records: dict[str, FleetTicket]
    queue: set[str]
    first: set[str]
    running: dict[str, Watched]
    unreadable: set[str]  # record files said to be unreadable (no ticket's): said once
    noted: dict[str, list[str]]  # what was set right, for the detail of its next attempt

    emit: Callable[..., None]
    endings: Endings

    def _save(self, record: FleetTicket, **changes: Any) -> FleetTicket:
        raise NotImplementedError

    def _tell(self, record: FleetTicket) -> FleetTicket:
        raise NotImplementedError

    def _quiet(self, record: FleetTicket, **changes: Any) -> FleetTicket:
        raise NotImplementedError

    def _retell(self) -> None:
        """Tell what a killed supervisor wrote and did not tell (``fleetstate.untold``), and
        deliver the webhooks it left: each state reaches the tracker once."""
        self.endings.flush()
        for ticket in sorted(self.records):
            record = self.records[ticket]
            if fleetstate.untold(record):
                self.records[ticket] = self._tell(record)
                self.emit("ticket_told", ticket=ticket, state=record.state)

    def _recover(self) -> None:
        """What a killed supervisor left: a run still alive is adopted (watched until it ends),
        and so is one that ended meanwhile and wrote how (its outcome is read at the next
        look); one killed with it is resumed before anything else, its attempt not counted. An
        unreadable record is set aside and made again from the ticket's run."""
        found = scan(self.layout, self.config, self.repo.toplevel)
        self._warn(found.warnings)
        self.unreadable |= found.skipped
        self.records.update(found.records)
        self._retell()
        for ticket, child in found.adopted.items():
            self.queue.add(ticket)
            self.running[ticket] = child
            self.emit("ticket_adopted", ticket=ticket, pid=child.pid)
        for record in found.dead:
            self.queue.add(record.ticket)
            self.first.add(record.ticket)
            self._quiet(
                self.records[record.ticket],
                state="retrying",
                attempt=max(0, record.attempt - 1),
                next_attempt_at=None,
                pid=None,
                pid_started_at=None,
                pid_started_since_boot=None,
                last_reason="crash",
                detail="its supervisor died mid-attempt; resumed first",
            )
            self.emit("ticket_recovered", ticket=record.ticket)

    def _warn(self, warnings: list[tuple[str | None, str]]) -> None:
        """Say what was set right or skipped, in the output and, for a ticket, in its record's
        detail (for ``cairn fleet status`` and the dashboard)."""
        for ticket, message in warnings:
            record = self.records.get(ticket) if ticket else None
            if ticket is not None:
                self.noted.setdefault(ticket, []).append(message)
            if record is not None and record.detail != message:
                self._save(record, detail=message)
            self.emit("ticket_warning", ticket=ticket, message=message)

    def _mend_records(self) -> None:
        """Records that became unreadable while this supervisor runs: written again from what
        it holds, or from the ticket's run."""
        said: list[tuple[str | None, str]] = []
        for name, _, problem in fleetstate.scan(self.layout):
            if problem is None or name in self.unreadable:
                continue
            known = self.records.get(name)
            args = (self.layout, self.config, self.repo.toplevel, name, problem, said)
            record = mend(*args, known=known)
            if record is None:
                self.unreadable.add(name)  # said once
                self.records.pop(name, None)
            else:
                self.records[name] = record
        self._warn(said)

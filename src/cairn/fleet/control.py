"""Pause, resume and stop single tickets of the embedded fleet (``cairn fleet pause|resume|stop
TICKET``), as the Temporal engine does them, and the supervisor's own stop.

A request is a file (``cairn.fleet.fleetcontrol``). The running supervisor acts on it within a
tick (``Controls``): a paused or stopped ticket that is running gets SIGTERM, so its run stops
its agent, snapshots and exits 3, and the ticket is then ``paused`` or ``stopped`` without the
attempt counting; one that is not running changes state at once. With no supervisor the command
changes the records itself (``act_alone``). ``decide`` is the rule both follow:

| state | pause | resume | stop |
|---|---|---|---|
| queued, retrying, waiting, interrupted by a stop | paused | unchanged | stopped |
| budget | paused | refused (raise the cap) | stopped |
| running | its run cut off: paused | unchanged | its run cut off: stopped |
| paused | unchanged | queued or retrying | stopped |
| stopped | paused | refused (fleet start) | unchanged |
| completed, needs_review, needs_input, failed, interrupted for good | refused | refused | refused |

``retry`` (``cairn.fleet.retry``) takes a failed, interrupted, stopped or needs-input ticket to
``retrying`` with its attempts counted afresh, and refuses every other state. ``fix`` (a fix
round, ``cairn.fleet.fixround``) takes a completed, needs-review or approved ticket to
``retrying``, and ``approve`` a completed or needs-review one to ``approved``.

A stopped ticket is started again by the next ``cairn fleet start`` (a new supervisor), as a
stopped workflow is on Temporal; a paused one waits across restarts until it is resumed.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import msgspec

from cairn.config.records import Config
from cairn.fleet import fixround, fleetcontrol, fleetstate, retry, schedule
from cairn.fleet import lease as fleet_lease
from cairn.fleet.budget import FleetBudget
from cairn.fleet.fleetcontrol import Request
from cairn.fleet.fleetstate import FleetTicket
from cairn.fleet.trackers.base import Tracker
from cairn.fleet.trackers.dir import is_finished
from cairn.fleet.watch import Watched, same_process
from cairn.fleet.workspaces import workspace_root
from cairn.git import Repo
from cairn.state.layout import Layout
from cairn.terms import FleetAction, FleetState
from cairn.util import clock, durable

CUTTING: dict[FleetAction, str] = {"pause": "pausing", "stop": "stopping", "resume": "resuming"}
ENDED_WORDS = {
    "needs_review": "needs review",
    "needs_input": "needs input",
    "failed": "failed",
    "interrupted": "is interrupted with its attempts used up",
}


class Decision(NamedTuple):
    state: FleetState | None  # where the action takes the ticket; None: it is there already
    refusal: str | None  # why the action does not apply: one line, the problem and the fix


def decide(action: FleetAction, record: FleetTicket, config: Config, supervised: bool) -> Decision:
    """What ``action`` does to the ticket of ``record`` (a record that says running is taken
    as running; the caller cuts its run off for a pause or stop)."""
    state, ticket = record.state, record.ticket
    if action in ("fix", "approve"):
        return Decision(*fixround.decide(action, record))
    if action == "retry":
        why = retry.refusal(record)
        return Decision(None, why) if why is not None else Decision("retrying", None)
    if state in ("completed", "approved"):
        return Decision(
            None,
            f"ticket {ticket} is {state}, so there is nothing to {action}; to run its plan "
            "again, give it a new ticket id",
        )
    if is_finished(record, config):
        words = ENDED_WORDS[state]
        verb = words if state == "interrupted" else f"{words},"
        return Decision(
            None,
            f"ticket {ticket} {verb} so the fleet no longer runs it and there is nothing to "
            f"{action}; "
            + (
                f"cairn resume {ticket} continues it by hand"
                if state == "needs_review"
                else f"cairn fleet retry {ticket} queues it again"
            ),
        )
    if action != "resume":
        target = schedule.HOLDS[action]
        return Decision(None if state == target else target, None)  # running: its run cut off
    if state == "paused":
        return Decision(schedule.released(record), None)
    if state == "stopped":
        after = " once this supervisor has stopped (cairn fleet stop)" if supervised else ""
        return Decision(
            None,
            f"ticket {ticket} is stopped, not paused; cairn fleet start starts it again{after}",
        )
    if state == "budget":
        return Decision(
            None,
            f"ticket {ticket} waits for the fleet's budget, not a person; raise "
            "fleet.max_cost_usd and start the fleet again",
        )
    return Decision(None, None)  # queued, running, retrying, waiting, interrupted by a stop


def why_not(action: FleetAction, record: FleetTicket, config: Config) -> str | None:
    """None when ``action`` changes the ticket of ``record``, else why it does not: the
    refusal, or that the ticket is where the action would take it (the dashboard's buttons say
    it beside a disabled one)."""
    decision = decide(action, record, config, supervised=True)
    if decision.refusal is not None or decision.state is not None:
        return decision.refusal
    if action == "resume":
        return f"ticket {record.ticket} is {record.state}, not paused: it runs"
    return f"ticket {record.ticket} is {record.state} already"


def changes(
    action: FleetAction, record: FleetTicket, state: FleetState, detail: str | None = None
) -> dict[str, Any]:
    """The record's new fields when ``action`` takes it to ``state`` (not running);
    ``detail``: the request's own, if it has one."""
    if action in ("fix", "approve"):
        afresh = {"restarts": record.restarts + 1} if action == "fix" else {}
        return fixround.changes(action, state, detail) | afresh
    if action == "retry":
        return retry.changes(record) | {"restarts": record.restarts + 1}
    detail = "resumed by a person" if action == "resume" else None
    return {
        "state": state,
        "next_attempt_at": None,
        "detail": detail or schedule.held_detail(action, record.ticket),
    }


class Host(Protocol):
    """What ``Controls`` needs of the supervisor."""

    repo: Repo
    layout: Layout
    config: Config
    records: dict[str, FleetTicket]
    running: dict[str, Watched]
    queue: set[str]
    tracker: Tracker
    emit: Callable[..., None]
    signals: int
    stopping: int

    def _save(self, record: FleetTicket, **changes: Any) -> FleetTicket: ...
    def _tell(self, record: FleetTicket) -> FleetTicket: ...
    def _quiet(self, record: FleetTicket, **changes: Any) -> FleetTicket: ...


class Controls:
    """The supervisor's side: the requests acted on each tick, a stopped ticket started again
    when the supervisor starts, and the supervisor's own graceful stop."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.cutting: dict[str, Request] = {}  # ticket → the pause or stop cutting its run off
        self.held_back: str | None = None  # why the due tickets wait (memory, disk), as said
        self.unwritten: dict[str, FleetTicket] = {}  # records a full disk did not take yet
        self.no_room_said = False
        self.disks = [host.layout.root]  # the file systems of the state root and the worktrees
        with contextlib.suppress(Exception):  # a bad workspace_root fails each ticket's start
            self.disks.append(workspace_root(host.repo, host.config))

    def hold_back(self, due: list[FleetTicket], spent: str | None) -> bool:
        """Whether the ``due`` tickets must wait, and why, written into their records and said
        once: the fleet's budget is ``spent`` (they wait as ``budget`` for a person), or free
        memory or disk space is under its cap (they wait as they are)."""
        host = self.host
        if spent is not None:
            for record in due:
                host._tell(host._save(record, state="budget", next_attempt_at=None, detail=spent))
            return True
        fleet = host.config.fleet
        note = schedule.memory_note(fleet) or schedule.disk_note(fleet, self.disks)
        if note is not None and note != self.held_back:
            for record in due:
                host._save(record, detail=note)
            host.emit("waiting", message=note)
        self.held_back = note
        return note is not None

    def at_start(self, budget: FleetBudget) -> None:
        """A new supervisor says the fleet's budget, starts each stopped ticket again (its
        attempts counted afresh), lets the tickets that waited for the budget run when it
        allows, then acts on the requests left to it."""
        host = self.host
        budget.read(host.records)
        host.emit("fleet_budget", **budget.fields())
        spent = budget.note()
        for record in list(host.records.values()):
            if record.state == "stopped":
                state = schedule.released(msgspec.structs.replace(record, attempt=0))
                detail = "stopped before; started again by this fleet start"
                host._quiet(
                    record,
                    state=state,
                    attempt=0,
                    restarts=record.restarts + 1,
                    next_attempt_at=None,
                    detail=detail,
                )
                host.emit("ticket_restarted", ticket=record.ticket, state=state)
            elif record.state == "budget" and spent is None:
                state = schedule.released(record)
                host._quiet(record, state=state, next_attempt_at=None, detail=None)
        self.tick()

    def write(self, record: FleetTicket) -> None:
        """Write ``record``; on a full disk keep it, to be written at a later tick."""
        try:
            fleetstate.write(self.host.layout, record)
        except OSError as exc:
            if exc.errno not in durable.DISK_FULL:
                raise
            self.unwritten[record.ticket] = record
            self.no_room(exc)
        else:
            self.unwritten.pop(record.ticket, None)

    def no_room(self, exc: OSError) -> int | None:
        """A write of the supervisor's failed: on a full disk it says so once (until a write
        succeeds again) and the loop goes on (None: no exit code); any other error stops the
        supervisor."""
        if exc.errno not in durable.DISK_FULL:
            raise exc
        if not self.no_room_said:
            self.no_room_said = True
            self.host.emit(
                "waiting",
                message=f"waiting: the disk is full ({exc}); the fleet's records are kept "
                "and written when there is room again",
            )
        return None

    def tick(self) -> None:
        """Write what a full disk held back, then act on each pending request, one at a time
        per ticket, oldest first."""
        for record in list(self.unwritten.values()):
            self.write(record)
        if not self.unwritten:
            self.no_room_said = False
        seen: set[str] = set()
        said: list[str] = []
        for request in fleetcontrol.pending(self.host.layout, said):
            if request.ticket not in seen and request.ticket not in self.cutting:
                self._act(request)
            seen.add(request.ticket)
        for message in said:
            self.host.emit("ticket_warning", ticket=None, message=message)

    def _act(self, request: Request) -> None:
        host, ticket, action = self.host, request.ticket, request.action
        record = host.records.get(ticket)
        if record is None or record.state in schedule.HELD:  # a person may have run it by hand
            record = fleetstate.read(host.layout, ticket) or record
        if record is None:
            fleetcontrol.done(request)
            return
        decision = decide(action, record, host.config, supervised=True)
        child = host.running.get(ticket)
        if child is not None and action in schedule.HOLDS and decision.refusal is None:
            if not request.signalled and not host.stopping:  # a second SIGTERM would kill
                child.signal(signal.SIGTERM)  # it stops its agent and snapshots; then `held`
                request = fleetcontrol.signalled(request)
            self.cutting[ticket] = request
            host._save(record, detail=f"{CUTTING[action]}: its run is saving a snapshot")
            host.emit(f"ticket_{action}", ticket=ticket, state=CUTTING[action])
            return
        if decision.state is None:
            state = "running" if child is not None else record.state
            host.emit("ticket_unchanged", ticket=ticket, state=state, detail=decision.refusal)
        else:
            record = host._save(record, **changes(action, record, decision.state, request.detail))
            host._tell(record)
            if decision.state not in schedule.HELD:
                host.queue.add(ticket)
            host.emit(f"ticket_{action}", ticket=ticket, state=decision.state)
        fleetcontrol.done(request)

    def held(self, ticket: str) -> FleetAction | None:
        """The pause or stop that cut ``ticket``'s run off, if any."""
        request = self.cutting.get(ticket)
        return request.action if request is not None else None

    def settled(self, ticket: str) -> None:
        """The run a pause or stop cut off has ended and its ticket's record says so."""
        request = self.cutting.pop(ticket, None)
        if request is not None:
            fleetcontrol.done(request)

    def check_stop(self) -> None:
        """The supervisor's graceful stop: SIGINT, SIGTERM or ``cairn fleet stop``. The first
        stops every run with a snapshot, the second says they are saving, the third kills."""
        host = self.host
        asked = host.signals
        if fleet_lease.take_stop_request(host.layout):
            host.signals += 1
            asked += 1
        while host.stopping < asked:  # every step, in order, even when two came at once
            host.stopping += 1
            running = sorted(host.running)
            if host.stopping == 1:
                host.emit("fleet_stopping", running=running)
                for ticket, child in host.running.items():
                    if ticket not in self.cutting:  # already told: a second SIGTERM kills
                        child.signal(signal.SIGTERM)
            elif host.stopping == 2:
                host.emit(
                    "fleet_stopping",
                    running=running,
                    message="the runs are saving their snapshots; a third stop kills them",
                )
            elif host.stopping == 3:
                host.emit("fleet_killing", running=running)
                for child in host.running.values():
                    child.kill()


def act_alone(layout: Layout, config: Config, repo: Repo | None = None) -> list[str]:
    """Carry out the pending requests on the records themselves, while no supervisor runs (under
    the lock a starting supervisor waits for). A running record's live run (an orphan of a
    supervisor that died) is sent SIGTERM, and its request waits until the run has exited.
    With ``repo``, an approval is told to the tracker as the supervisor tells it (GitHub: an
    approving review on the ticket's pull request). The warnings: the requests that could not
    be read, and were removed, and what the tracker could not be told."""
    warnings: list[str] = []
    approved: list[FleetTicket] = []
    with fleetcontrol.locked(layout):
        if fleet_lease.holder(layout) is not None:
            return warnings  # the supervisor acts on them
        seen: set[str] = set()
        for request in fleetcontrol.pending(layout, warnings):
            if request.ticket not in seen:
                seen.add(request.ticket)
                record = _act_alone(layout, config, request)
                if record is not None and request.action == "approve":
                    approved.append(record)
    if approved and repo is not None:
        from cairn.fleet.trackers import open_tracker

        tracker = open_tracker(repo, config, layout)
        for record in approved:  # told, then written as told (else the next supervisor tells it)
            tracker.transition(record.ticket, record.state, record.detail)
            told = msgspec.structs.replace(record, told=fleetstate.key_of(record))
            fleetstate.write(layout, told)
        warnings += tracker.said()
    return warnings


def _act_alone(layout: Layout, config: Config, request: Request) -> FleetTicket | None:
    """Carry ``request`` out; the record it wrote, if it changed one."""
    record = fleetstate.read(layout, request.ticket)
    if record is None:
        fleetcontrol.done(request)
        return None
    if record.state == "running":
        if same_process(record.pid, record.pid_started_at, record.pid_started_since_boot):
            if request.action in schedule.HOLDS and not request.signalled:
                assert record.pid is not None
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(record.pid, signal.SIGTERM)
                fleetcontrol.signalled(request)
            if request.action in schedule.HOLDS:
                return None  # done once the run has exited
            fleetcontrol.done(request)
            return None
        # its run is gone: the attempt does not count (as the next supervisor would see it)
        record = msgspec.structs.replace(
            record,
            state="retrying",
            attempt=max(0, record.attempt - 1),
            pid=None,
            pid_started_at=None,
            pid_started_since_boot=None,
            last_reason=record.last_reason if request.signalled else "crash",
        )
    decision = decide(request.action, record, config, supervised=False)
    written = None
    if decision.state is not None:
        new = changes(request.action, record, decision.state, request.detail)
        written = msgspec.structs.replace(record, **new, updated=clock.now())
        fleetstate.write(layout, written)
    fleetcontrol.done(request)
    return written

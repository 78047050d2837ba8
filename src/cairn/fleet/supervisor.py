"""``cairn fleet start``: the supervisor's loop.

It takes tickets from the tracker, gives each its worktree and runs it as a child ``cairn run``
(first attempt) or ``cairn resume`` (every later one), at most ``concurrency`` at once; it
retries interrupted runs after a backoff, stops stalled ones with the stall signal, and on a
stop (SIGINT, SIGTERM, ``cairn fleet stop``) stops every run with a snapshot. A person's pause,
resume or stop of one ticket, the fleet's budget and the agents' usage and rate limits
(``waiting``) are ``fleet.control``'s, ``fleet.budget``'s and ``fleet.limitwait``'s. It never
holds the only copy of anything: each change of a ticket is written to its fleet record before
the loop goes on, so a new supervisor continues where a killed one was.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from cairn.config.records import Config
from cairn.errors import CairnError, ExitCode
from cairn.faults import crash_at
from cairn.fleet import fleetcontrol, fleetstate, needs, recovery, schedule, steer, watch
from cairn.fleet import lease as fleet_lease
from cairn.fleet.budget import FleetBudget
from cairn.fleet.control import Controls
from cairn.fleet.endings import Endings
from cairn.fleet.fleetstate import FleetTicket
from cairn.fleet.hooks import set_up
from cairn.fleet.intake import Intake
from cairn.fleet.limitwait import LimitWaiting, agents_of
from cairn.fleet.retry import RETRIED
from cairn.fleet.trackers import Tracker, open_tracker
from cairn.fleet.watch import Adopted, Attempt, Watched, outcome_on_disk
from cairn.fleet.workspaces import ensure, run_hook
from cairn.git import Repo
from cairn.state.layout import Layout, discover
from cairn.terms import FleetState, finished
from cairn.util import clock
from cairn.util.durations import parse_duration

TICK = 0.5  # at most this long between two looks at the children, the stop file and the clock
Emit = Callable[..., None]  # emit(kind, **fields): one line of output, one JSON object


class Supervisor(recovery.Recovering, LimitWaiting):
    def __init__(
        self,
        workspace: Path | str,
        *,
        once: bool = False,
        concurrency: int | None = None,
        emit: Emit | None = None,
    ) -> None:
        repo, config, layout = discover(workspace)
        self.repo: Repo = repo
        self.config: Config = config
        self.layout: Layout = layout
        self.chain: list[str] = agents_of(config)  # BadInput: a fallback naming no agent
        self.fleet = config.fleet
        self.once = once
        self.concurrency = concurrency or self.fleet.concurrency
        self.emit: Emit = emit or (lambda kind, **fields: None)
        self.tracker: Tracker = open_tracker(repo, config, layout)
        self.intake = Intake(self.tracker, layout, self.emit)
        self.endings = Endings(repo, config, layout, self.tracker, self.emit)
        self.records: dict[str, FleetTicket] = {}
        self.queue: set[str] = set()  # the tickets this supervisor drives
        self.first: set[str] = set()  # tickets whose supervisor died mid-attempt: resumed first
        self.running: dict[str, Watched] = {}
        self.signals = 0
        self.wake = threading.Event()  # set by a child whose output ended
        self.stopping = 0  # how many stop requests (signals or the stop file) were acted on
        self.unreadable: set[str] = set()
        self.noted: dict[str, list[str]] = {}
        self.limit_warned: set[str] = set()  # unreadable limit records said once
        self.next_poll = 0.0  # time.monotonic() of the next tracker poll; 0 asks for one now
        self.controls = Controls(self)
        self.budget = FleetBudget(self.fleet, layout)

    # --- the loop ------------------------------------------------------------------------------

    def run(self) -> int:
        """Supervise until the queue is drained (``once``) or a stop; the exit code."""
        held = fleet_lease.acquire(self.layout)
        try:
            fleet_lease.take_stop_request(self.layout)  # meant for a supervisor before this one
            fleetcontrol.wait_unlocked(self.layout)  # a command changing records alone is done
            with fleetcontrol.signals_counted(self._signal):
                self.emit(
                    "fleet_started", pid=held.me.pid, concurrency=self.concurrency, once=self.once
                )
                self._recover()
                self.controls.at_start(self.budget)
                code = self._loop()
                self.emit(
                    "fleet_finished", exit_code=code, tickets=self._states(), **self.intake.totals()
                )
                return code
        finally:
            held.release()

    def _loop(self) -> int:
        poll_every = parse_duration(self.fleet.poll_interval)
        while True:
            try:
                code = self._tick(poll_every)
            except OSError as exc:  # a full disk: the fleet waits for room, saying so
                code = self.controls.no_room(exc)  # None, or it raises exc
            if code is not None:
                return code
            # a child's exit wakes the loop at once; otherwise it looks twice a second (a
            # signal is seen within that), so the supervisor's own CPU stays small
            self.wake.wait(TICK)
            self.wake.clear()

    def _tick(self, poll_every: float) -> int | None:
        self.controls.check_stop()
        self._reap()
        self.controls.tick()
        if self.stopping:
            if not self.running:
                return ExitCode.INTERRUPTED
        else:
            self._watch_stalls()
            if time.monotonic() >= self.next_poll and not (self.once and self.next_poll):
                self.next_poll = time.monotonic() + poll_every
                self._poll_tracker()
            self._start_due()
            if self.once and not self.running and not self._pending():
                return self._exit_code()
        return None

    def _signal(self) -> None:
        # no wake.set() here: the handler runs in the main thread, which may hold the event's
        # lock at that instant; the loop sees the count within a tick
        self.signals += 1

    # --- tickets -------------------------------------------------------------------------------

    def _save(self, record: FleetTicket, **changes: Any) -> FleetTicket:
        updated = msgspec.structs.replace(record, **{**changes, "updated": clock.now()})
        self.records[updated.ticket] = updated
        self.controls.write(updated)  # on a full disk, kept and written when there is room
        return updated

    def _tell(self, record: FleetTicket) -> FleetTicket:
        """``record``, just written with a new state, told to the webhooks and the tracker
        (``Endings.tell``), then written as told. A supervisor killed in between leaves it
        untold, and the next one tells it (``_recover``): its effects are keyed, so once."""
        crash_at("fleet.record")
        self.endings.tell(record)
        needs.raised(self.layout, record)  # a person's turn: journalled, for time to unblock
        return self._save(record, told=fleetstate.key_of(record))

    def _quiet(self, record: FleetTicket, **changes: Any) -> FleetTicket:
        """``record`` changed as ``changes`` say, with nothing to tell (the recovery of a run
        killed with its supervisor, a stopped ticket let go): written as told."""
        changed = msgspec.structs.replace(record, **changes)
        return self._save(changed, told=fleetstate.key_of(changed))

    def _poll_tracker(self) -> None:
        self._mend_records()
        for command in self.tracker.commands():  # a person's `/cairn …` on an issue: as asked
            said = steer.carry_out(self.layout, self.config, command)
            self.tracker.reply(command.ticket, said, f"cairn:{command.ticket}:cmd:{command.ref}")
            self.emit("ticket_command", ticket=command.ticket, verb=command.verb, said=said)
            self.controls.tick()  # its request carried out now (before a --once exit)
        for candidate in self.intake.poll():
            ticket = candidate.ticket
            record = self.records.get(ticket) or fleetstate.read(self.layout, ticket)
            if record is None:
                plan = candidate.plan
                with contextlib.suppress(ValueError):
                    plan = plan.relative_to(self.repo.toplevel)
                record = FleetTicket(
                    ticket=ticket, plan=str(plan), state="queued", told="", updated=clock.now()
                )
                fleetstate.write(self.layout, record)
                self.emit("ticket_queued", ticket=ticket, plan=str(plan))
            self.records[ticket] = record
            if schedule.ahead(self.fleet, record) or ticket in self.running:
                self.queue.add(ticket)

    def _pending(self) -> bool:
        return any(schedule.pending(self.fleet, self.records[t]) for t in self.queue)

    def _states(self) -> dict[str, str]:
        return {t: self.records[t].state for t in sorted(self.queue)}

    def _exit_code(self) -> int:
        states = set(self._states().values())
        if states & {"interrupted", *schedule.HELD}:  # left resumable
            return ExitCode.INTERRUPTED
        if states - {"completed"}:
            return ExitCode.FAILURE
        return self.intake.settle(bool(states))

    # --- starting attempts ---------------------------------------------------------------------

    def _start_due(self) -> None:
        spent = self.budget.tick(self.running, self.emit)  # running runs told when spent
        free = self.concurrency - len(self.running)
        if free <= 0:
            return
        now = clock.now()
        due = [
            self.records[t]
            for t in self.queue
            if t not in self.running and schedule.runnable(self.fleet, self.records[t], now)
        ]
        if not due or self.controls.hold_back(due, spent):
            return
        if self._limited(due, now):
            return
        due.sort(key=lambda r: (r.ticket not in self.first, *schedule.order(r)))
        for record in due[:free]:
            if self.tracker.claim(record.ticket):
                self._start(record)

    def _start(self, record: FleetTicket) -> None:
        ticket = record.ticket
        self.first.discard(ticket)
        try:
            space = ensure(self.repo, self.config, ticket)
        except Exception as exc:  # the ticket fails, the fleet goes on
            self._finish(record, "failed", detail=f"its worktree could not be made: {exc}")
            return
        record = self._save(record, worktree=str(space.path), branch=space.branch)
        self._warn([(ticket, warning) for warning in space.warnings])
        try:
            hook = set_up(space.path, space.created or space.repaired, self.config, ticket)
        except (CairnError, OSError) as exc:  # this ticket's worktree; the others go on
            self._finish(record, "failed", detail=f"its worktree cannot be used: {exc}")
            return
        if not hook.ok:
            self._finish(record, "failed", detail=hook.describe("after_create"))
            return
        hook = run_hook("before_run", space.path, self.config, ticket=ticket)
        if not hook.ok:
            self._ended(record, None, "error", hook.describe("before_run"), counted=True)
            return
        argv = self._command(record)
        if argv is None:
            return
        attempt = Attempt(ticket, self.layout, argv, space.path, wake=self.wake)
        self.running[ticket] = attempt
        record = self._save(
            record,
            state="running",
            attempt=record.attempt + 1,
            next_attempt_at=None,
            pid=attempt.pid,
            pid_started_at=attempt.started_at,
            pid_started_since_boot=attempt.started_since_boot,
            detail="; ".join(self.noted.pop(ticket, [])) or None,  # what was set right
        )
        if ticket in self.controls.unwritten:  # a full disk did not take the record: no run
            attempt.cancel()  # it ends at once, as if cut off; the disk-full rules follow
        else:
            attempt.go()  # only now: a supervisor killed before this leaves no unrecorded run
        record = self._tell(record)
        self.emit(
            "ticket_started",
            ticket=ticket,
            attempt=record.attempt,
            command=argv[0],
            worktree=str(space.path),
            pid=attempt.pid,
        )

    def _command(self, record: FleetTicket) -> list[str] | None:
        """``run`` for a first attempt, ``resume`` after; None when the files say the last
        attempt finished (its supervisor died before it could record that). A run killed
        before it wrote its marker (its last step before any agent works) is started anew:
        there is nothing to resume."""
        ticket = record.ticket
        status, reason = outcome_on_disk(self.layout, ticket)
        fresh = record.attempt == 0 and record.last_reason is None
        begun = self.layout.marker_path(ticket).exists()
        if status == "none" or fresh or (not finished(status) and not begun):
            plan = self.repo.toplevel / record.plan
            return ["run", str(plan), "--ticket", record.ticket, "--json"]
        waits = reason == "no_progress" and record.last_reason != RETRIED  # a person retried it
        if finished(status) or waits:  # finished, or it waits for a person
            blocked = reason == "no_progress" and watch.interruption_detail(self.layout, ticket)
            ending: FleetState = status if finished(status) else "needs_input"
            self._finish(record, ending, detail=blocked or None)
            return None
        return ["resume", record.ticket, "--json"]

    # --- watching and ending attempts ----------------------------------------------------------

    def _watch_stalls(self) -> None:
        limit = parse_duration(self.fleet.stall_timeout)
        grace = self.config.agent.cutoff_timeout_ms / 1000
        now = time.monotonic()
        for ticket, child in self.running.items():
            if child.stall_sent_at is None:
                idle = child.idle()
                if idle >= limit:
                    child.stall_sent_at = now
                    child.signal(signal.SIGUSR1)
                    self.emit("ticket_stalled", ticket=ticket, idle=round(idle, 1))
            elif now - child.stall_sent_at > limit + 2 * grace:
                child.kill()

    def _reap(self) -> None:
        for ticket, child in list(self.running.items()):
            if not child.poll():
                continue
            del self.running[ticket]
            record = self.records[ticket]
            code = child.exit_code
            reason, detail, needs_input = child.verdict()
            if self.stopping and code is not None and code < 0:
                reason = schedule.STOPPED
            if isinstance(child, Adopted) and code is None:  # it wrote no outcome: its files
                status, reason = outcome_on_disk(self.layout, ticket)
                code = {"completed": 0, "needs_review": 1}.get(status)
                reason = status if code == 1 else reason or "crash"
            self._ended(record, code, reason, detail, needs_input=needs_input)
            if record.worktree:
                run_hook("after_run", Path(record.worktree), self.config, ticket=record.ticket)

    def _ended(
        self,
        record: FleetTicket,
        exit_code: int | None,
        reason: str | None,
        detail: str | None,
        *,
        needs_input: bool = False,
        counted: bool = False,
    ) -> None:
        if counted:
            record = msgspec.structs.replace(record, attempt=record.attempt + 1)
        disk = schedule.disk_note(self.fleet, self.controls.disks)
        if schedule.out_of_space(exit_code, reason, detail, disk):
            reason = "disk_full"
        now = clock.now()
        held = self._reset_of(now)
        verdict = schedule.after_attempt(
            *(self.fleet, record, exit_code, reason, detail, needs_input, now),
            held=self.controls.held(record.ticket),
            budget=self.budget.note(),
            disk=disk,
            reset=held.resets_at if held is not None else None,
        )
        attempt = record.attempt if verdict.counted else record.attempt - 1
        record = self._save(
            record,
            attempt=max(0, attempt),
            last_exit=exit_code,
            last_reason=reason,
            pid=None,
            pid_started_at=None,
            pid_started_since_boot=None,
        )
        if verdict.state == "retrying":
            self._tell(
                self._save(
                    record,
                    state="retrying",
                    next_attempt_at=verdict.next_attempt_at,
                    detail=verdict.detail,
                )
            )
            self.emit(
                "ticket_retrying",
                ticket=record.ticket,
                attempt=record.attempt,
                reason=reason,
                next_attempt_at=fleetstate.iso(verdict.next_attempt_at),
                detail=verdict.detail,
            )
        elif verdict.state == "waiting":  # its run stopped on a limit: not an attempt
            self._stopped_on_limit(record, verdict, reason, held)
        else:
            self._finish(record, verdict.state, detail=verdict.detail)
        self.controls.settled(record.ticket)
        self.budget.read([record.ticket])

    def _finish(self, record: FleetTicket, state: FleetState, detail: str | None) -> None:
        record = self._save(record, state=state, detail=detail, next_attempt_at=None, pid=None)
        record = self._tell(record)
        self.emit(
            "ticket_finished",
            ticket=record.ticket,
            state=state,
            attempt=record.attempt,
            reason=record.last_reason,
            detail=detail,
        )

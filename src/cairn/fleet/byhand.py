"""``cairn resume`` of a fleet ticket, typed by a person anywhere in the repository: the run goes
on in the ticket's worktree, on ``cairn/<ticket>`` (rebuilt from the branch and the latest
snapshot when it is gone, its ``after_create`` hook run then), never in the work tree it was
typed in; and the ticket's fleet record follows it, so ``cairn fleet status`` and ``cairn
status`` agree.

While it runs, the record says ``running`` with this process's pid: a supervisor that starts
meanwhile adopts it instead of starting the ticket again. It is refused while the fleet runs the
ticket, and while a running supervisor would start it (pause it first). A ticket whose run never
started (its attempts failed before, e.g. a ``before_run`` hook, or a full disk) gets its first
run from its plan (``cairn run``), so the hint ``cairn resume <ticket>`` is always true. The
resume counts as an attempt (the first ``cairn run`` is 1, each resume adds 1), as in the fleet.
The supervisor's own attempts (``ENV_FLEET_ATTEMPT`` names their ticket) resume as they are.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from cairn.config.records import Config, FleetConfig
from cairn.errors import BadInput
from cairn.fleet import fleetstate, lease, schedule
from cairn.fleet.fleetstate import FleetTicket
from cairn.fleet.hooks import set_up
from cairn.fleet.watch import outcome_on_disk
from cairn.fleet.workspaces import ensure
from cairn.run import launch
from cairn.run.orchestrator import RunOutcome
from cairn.state.layout import Layout, discover
from cairn.terms import ENV_FLEET_ATTEMPT, LIMIT_KINDS, FleetState
from cairn.util import clock
from cairn.util.procs import process_start


def resume(workspace: Path | str, ticket: str | None, **options: Any) -> RunOutcome:
    """``cairn resume [TICKET]``: in the ticket's worktree when it is a fleet ticket (of the
    embedded engine), else where it was typed (``launch.resume``)."""
    from cairn import tickets
    from cairn.state import branches

    repo, config, layout = discover(workspace)
    named = tickets.validate(ticket) if ticket else branches.default_ticket(repo, layout)[0]
    fleets = config.fleet.engine == "embedded" and os.environ.get(ENV_FLEET_ATTEMPT) != named
    record = fleetstate.read(layout, named) if fleets else None
    if record is None:  # not a fleet ticket, or the fleet's own attempt
        return launch.resume(workspace, ticket, **options)
    if options.get("remote"):
        raise BadInput(
            f"ticket {named} is a fleet ticket: the fleet pushes its branch itself; resume it "
            "without --remote"
        )
    options["remote"] = ""  # [run] remote is not the fleet's
    state, _ = fleetstate.live_state(record)
    if state == "running":
        raise BadInput(
            f"ticket {named} is being run by the fleet (pid {record.pid}); wait for it, or "
            f"cairn fleet pause {named} first"
        )
    holder = lease.holder(layout)
    if holder is not None and schedule.pending(config.fleet, record):
        raise BadInput(
            f"the fleet supervisor ({holder.describe()}) runs ticket {named} itself; "
            f"cairn fleet pause {named} first to run it by hand"
        )
    space = ensure(repo, config, named)
    hook = set_up(space.path, space.created or space.repaired, config, named)
    if not hook.ok:
        raise BadInput(f"{hook.describe('after_create')} in {space.path}; fix it and try again")
    mine = os.getpid()
    start = process_start(mine)
    before = record
    fleetstate.write(
        layout,
        msgspec.structs.replace(
            record,
            state="running",
            attempt=record.attempt + 1,
            worktree=str(space.path),
            branch=space.branch,
            pid=mine,
            pid_started_at=start.at.timestamp() if start else None,
            pid_started_since_boot=start.since_boot if start else None,
            detail="resumed by hand",
            updated=clock.now(),
        ),
    )
    try:
        if outcome_on_disk(layout, named)[0] == "none":
            plan = repo.toplevel / record.plan
            if not plan.is_file():
                raise BadInput(
                    f"ticket {named} has no run yet and its plan {plan} is gone; restore the "
                    "plan file, then cairn resume it again"
                )
            outcome = launch.run(space.path, plan, ticket=named, **options)
        else:
            outcome = launch.resume(space.path, named, **options)
    except BaseException:
        fleetstate.write(layout, msgspec.structs.replace(before, updated=clock.now()))
        raise
    fleetstate.write(layout, _after(config.fleet, before, outcome, _reset(config, layout)))
    return outcome


def _reset(config: Config, layout: Layout) -> datetime | None:
    """When the soonest limit of the fleet's agents resets (None: none is held)."""
    from cairn.fleet.limitwait import agents_of
    from cairn.state import limited

    now = clock.now()
    held = schedule.soonest(agents_of(config), limited.all_held(layout, now))
    return held.resets_at if held is not None else None


def _after(
    fleet: FleetConfig, before: FleetTicket, outcome: RunOutcome, reset: datetime | None
) -> FleetTicket:
    """The ticket's record once the run by hand has ended with ``outcome``: completed, needs
    review or input; stopped on an agent's limit, ``waiting`` until ``reset`` (not an attempt);
    interrupted again, back where the fleet had it (held, or due again), else ``interrupted``."""
    state: FleetState | None = None if outcome.status == "interrupted" else outcome.status
    detail = outcome.error if state == "needs_input" else None
    if state is None and outcome.reason in LIMIT_KINDS and before.state not in schedule.HELD:
        return msgspec.structs.replace(
            before,
            state="waiting",
            next_attempt_at=reset or clock.now(),
            pid=None,
            pid_started_at=None,
            pid_started_since_boot=None,
            last_exit=outcome.exit_code,
            last_reason=outcome.reason,
            detail=outcome.error,
            updated=clock.now(),
        )
    if state is None:
        if before.state in schedule.HELD:
            state = before.state
        else:
            state = "retrying" if schedule.pending(fleet, before) else "interrupted"
        why = outcome.reason or "interrupted"
        detail = f"{why} in a resume by hand; cairn resume {before.ticket} continues it"
    return msgspec.structs.replace(
        before,
        state=state,
        attempt=before.attempt + 1,
        next_attempt_at=None,
        pid=None,
        pid_started_at=None,
        pid_started_since_boot=None,
        last_exit=outcome.exit_code,
        last_reason=outcome.reason or outcome.status,
        detail=detail,
        updated=clock.now(),
    )

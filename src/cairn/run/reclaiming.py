"""A resumed run takes its ticket back: the agent a dead cairn left running stopped, a takeover
journalled, and the marker written again with this process as its owner."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from cairn.run.events import EventSink
from cairn.state import marker, runstate
from cairn.state.runstate import RunRef
from cairn.util import clock, durable, procs

if TYPE_CHECKING:
    from cairn.state.catchup import CatchupReport
    from cairn.state.lease import Lease


def reclaim(ref: RunRef, lease: Lease, report: CatchupReport) -> tuple[str, int]:
    """Write the marker again with this process as the owner; returns the phase and round
    where the run goes on."""
    with durable.locked(ref.lock_path):
        current = marker.read(ref.marker_path)
        if current is not None and current.run == ref.run_id:
            return _own_marker(ref, lease, report, current)
        return _own_marker(ref, lease, report, lease.previous)


def _own_marker(
    ref: RunRef, lease: Lease, report: CatchupReport, previous: marker.Marker | None
) -> tuple[str, int]:
    now = clock.now()
    phase = (previous.phase if previous else None) or report.phase or "implement"
    if phase not in ("implement", "evaluate", "review", "fix"):
        phase = "implement"
    round_number = (previous.round if previous else None) or report.round or 1
    marker.write(
        ref.marker_path,
        marker.Marker(
            skill=previous.skill if previous else "impl",
            phase=phase,
            round=previous.round if previous else None,
            started_at=previous.started_at if previous else now,
            last_updated=now,
            ticket=ref.ticket,
            run=ref.run_id,
            owner=lease.me,
            snapshot=previous.snapshot if previous else None,
        ),
    )
    return phase, round_number


def after_a_dead_owner(ref: RunRef, lease: Lease, grace: float, sink: EventSink) -> None:
    """Stop the agent a dead cairn left running, and journal a takeover."""
    previous = lease.previous
    stopped = _stop_orphaned_agent(previous, grace)
    if stopped is not None:
        sink.event(
            "warning",
            message=f"stopped agent pid {stopped}, left running by the dead cairn process",
        )
    if lease.takeover is not None:
        runstate.record(
            ref,
            "takeover",
            stopped_agent=stopped,
            reason=lease.takeover,
            previous_run=previous.run if previous else None,
            previous_owner=msgspec.to_builtins(previous.owner)
            if previous and previous.owner
            else None,
        )


def _stop_orphaned_agent(previous: marker.Marker | None, grace: float) -> int | None:
    """An agent whose cairn died keeps running; stop its process group before resuming.

    Only on this host, and only when the pid still belongs to that agent (same start time).
    """
    from cairn.state import owner

    if previous is None or previous.owner is None or previous.dispatch is None:
        return None
    pid = previous.dispatch.pid
    if pid is None:
        return None
    agent = owner.Owner(
        host=previous.owner.host,
        pid=pid,
        pid_started_at=previous.dispatch.pid_started_at,
        pid_started_since_boot=previous.dispatch.pid_started_since_boot,
        boot_id=previous.owner.boot_id,
    )
    if owner.check(agent, previous.last_updated, float("inf"), clock.now())[0] != "alive":
        return None
    procs.stop_group(pid, grace)
    return pid

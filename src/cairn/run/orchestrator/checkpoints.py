"""What the loop records between dispatches: phases, snapshots of the work tree, cutoffs, and
the check of the work tree when a run is resumed."""

from __future__ import annotations

import contextlib

from cairn.agents.base import Result
from cairn.errors import BadInput
from cairn.run.orchestrator.context import RunContext
from cairn.state import marker, runstate
from cairn.terms import CUTOFF_FOR, CutoffReason
from cairn.util import clock

# The cutoffs whose detail is ``ctx.last_error``: the agent's error text, what the budget says,
# or the blocker of a run that made no progress.
DETAILED = ("error", "crash", "budget", "no_progress", "rate_limit", "usage_limit", "fenced")


def enter_phase(ctx: RunContext, phase: str, round_number: int | None) -> None:
    ctx.stats.phases.append(phase if round_number is None else f"{phase} {round_number}")
    runstate.update_marker(ctx.ref, "phase", phase=phase, round=round_number)
    ctx.sink.event("phase", phase=phase, round=round_number)
    ctx.sink.update(phase=phase, round=round_number, total=ctx.summary().total())


def snapshot(ctx: RunContext, reason: str) -> marker.SnapshotRef | None:
    """Save the work tree under the ticket's WIP ref; a failed snapshot is a warning, never the
    end of the run. Returns the latest snapshot (None when preserving work is off)."""
    if not ctx.config.agent.preserve_uncommitted_work:
        return None
    from cairn import wip

    try:
        saved = wip.save(
            ctx.repo.toplevel,
            ticket=ctx.ref.ticket,
            reason=reason,
            timeout=ctx.grace,
            run_id=ctx.ref.run_id,
            config=ctx.config,
        )
    except Exception as exc:  # a failed snapshot must not end the run; say so
        ctx.sink.event("warning", message=f"snapshot failed: {exc}")
        with contextlib.suppress(OSError):  # a full disk may refuse this line too
            runstate.record(ctx.ref, "snapshot", reason=reason, error=str(exc))
        return None
    if saved.commit is None:
        return ctx.last_snapshot
    snap = marker.SnapshotRef(ref=saved.ref, commit=saved.commit, at=clock.now())
    if saved.created:
        ctx.stats.snapshots.append(saved.commit)
        runstate.update_marker(ctx.ref, "snapshot", snapshot=snap)
        ctx.sink.event("snapshot", commit=saved.commit, reason=reason)
        ctx.sink.update(snapshot=saved.commit[:12])
    ctx.last_snapshot = snap
    # a note of what git holds: a full disk, or a list the summary has no room for, leaves the
    # section as it was (the disk's own stop comes with the run's next write)
    with contextlib.suppress(OSError, BadInput):
        runstate.list_files(ctx.ref, files_changed(ctx))
    return snap


def files_changed(ctx: RunContext) -> list[str]:
    """What the run changed: the files the agents reported on their tasks, the branch's
    commits since the run started, and the uncommitted work the last snapshot holds."""
    reported = {f for t in ctx.summary().tasks for f in t.files or []}
    from cairn.wip.history import branch_paths

    snap = ctx.last_snapshot.commit if ctx.last_snapshot else None
    return sorted(reported | set(branch_paths(ctx.repo, ctx.base, snap)))


class TaskSnapshots:
    """A snapshot each time a task is newly completed (checked after every coder turn)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.seen = self._completed()

    def _completed(self) -> set[int]:
        return {t.number for t in self.ctx.summary().tasks if t.status == "completed"}

    def after_turn(self) -> None:
        current = self.ctx.summary()
        done = {t.number for t in current.tasks if t.status == "completed"}
        new, self.seen = done - self.seen, done
        item = current.status.item
        self.ctx.sink.update(task=item if isinstance(item, int) else None, total=current.total())
        for number in sorted(new):
            snapshot(self.ctx, f"task {number} done")


def cutoff_reason(ctx: RunContext, result: Result) -> CutoffReason:
    """Why a dispatch that did not finish its work stopped: a signal to cairn wins, then the
    run's cost passing agent.max_cost_usd."""
    if ctx.signalled:
        return ctx.signalled
    return "budget" if ctx.over_budget else CUTOFF_FOR[result.reason]


def cutoff(ctx: RunContext, role: str, reason: CutoffReason) -> None:
    """A dispatch was cut off: snapshot, then the summary, marker and journal say so, with
    the agent's error text (or what the budget says) as the detail."""
    snap = snapshot(ctx, f"cutoff: {reason}")
    detail = ctx.last_error if reason in DETAILED else None
    runstate.record_cutoff(ctx.ref, reason, snap, detail)
    said = {"detail": detail} if detail else {}
    ctx.sink.event(
        "cutoff", reason=reason, role=role, snapshot=snap.commit[:12] if snap else None, **said
    )


def check_tree(ctx: RunContext, saved: str | None) -> None:
    """Resume never touches the work tree; it says when the tree is not what was saved."""
    before = ctx.last_snapshot
    snap = snapshot(ctx, "resume")
    if saved and snap is not None and snap.commit != saved:
        ctx.sink.event(
            "warning",
            message=(
                f"the work tree differs from the last snapshot {saved[:12]}; it is left "
                f"as it is (now saved as {snap.commit[:12]}); to bring back the interrupted "
                f"agent's files: cairn wip restore {saved[:12]} --dry-run"
            ),
        )
    ctx.last_snapshot = snap or before

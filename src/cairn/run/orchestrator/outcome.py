"""How a run ends: completed, needs review, needs input or interrupted (both
resumable); the ``RunOutcome`` that ``cairn run --json`` prints last, and the run-summary
artifact."""

from __future__ import annotations

import contextlib
from typing import Any

from msgspec import Struct, field

from cairn.errors import ExitCode
from cairn.faults import crash_at
from cairn.run.orchestrator.checkpoints import DETAILED, snapshot
from cairn.run.orchestrator.context import RunContext
from cairn.state import accounting, runstate
from cairn.terms import RUN_FORMAT, CutoffReason, RunStatus

RESUMABLE = ("interrupted", "needs_input")


class Remote(Struct, kw_only=True):
    """Where a ``--remote`` run's pushes left its ticket on the remote (``RunOutcome.remote``):
    the shas there after the last push that reached it, and why the last one did not."""

    name: str  # the remote, as the repository names it
    branch: str  # cairn/<ticket>
    pushed: bool  # the run's last push reached the remote
    commit: str | None = None  # the branch's sha there
    snapshot: str | None = None
    state: str | None = None
    error: str | None = None  # why the last push failed (retry: cairn resume … --remote)
    fenced: str | None = None  # the remote refused the run's push: another machine continued


class RunOutcome(Struct, kw_only=True):
    format: int = RUN_FORMAT
    ticket: str
    run: str
    status: RunStatus
    reason: str | None = None
    exit_code: int
    run_dir: str
    summary_path: str | None = None
    snapshot: str | None = None
    dispatches: int = 0
    turns: int = 0
    rounds: int = 0
    elapsed_seconds: float = 0.0
    next_command: str | None = None
    error: str | None = None  # the agent's error text (or the budget's) for a cutoff
    usage: dict[str, Any] = field(default_factory=accounting.usage)  # every session of the run
    usage_unknown: int = 0  # dispatches whose usage is unknown (cut off before any was seen)
    # each agent's, every session of the run (None: that agent's usage is unknown)
    usage_by_agent: dict[str, Any] = field(default_factory=dict)
    denials: list[dict[str, str]] = field(default_factory=list)  # every session of the run
    # needs_input: what blocked the idle dispatches (their denials, the agent's last message)
    blocker: dict[str, Any] | None = None
    remote: Remote | None = None  # a --remote run: what its pushes left on the remote


def finished(ctx: RunContext, status: RunStatus, reason: str | None) -> RunOutcome:
    """The run's work is over (completed, or blocking findings left for a person): a last
    snapshot, the run summary, the marker removed and the lease released."""
    snapshot(ctx, "run finished")
    crash_at("run.snapshot")
    code = ExitCode.OK if status == "completed" else ExitCode.FAILURE
    if status == "completed":
        runstate.update_marker(ctx.ref, "phase", phase="done", round=None)
    write_run_summary(ctx, status, reason)
    crash_at("run.summary")
    runstate.end(ctx.ref, status)
    crash_at("run.ended")
    ctx.lease.release()
    return _outcome(ctx, status, reason, code)


def interrupted(ctx: RunContext, reason: CutoffReason) -> RunOutcome:
    """The run stops before its work is over: the summary says where and why, the marker stays
    (without an owner) for ``cairn resume``, the lease is released."""
    write_run_summary(ctx, "interrupted", reason)
    crash_at("run.summary")
    runstate.interrupt(ctx.ref, ctx.lease, reason, ctx.last_snapshot, _detail(ctx, reason))
    crash_at("run.ended")
    return _outcome(ctx, "interrupted", reason, ExitCode.INTERRUPTED)


def needs_input(ctx: RunContext) -> RunOutcome:
    """The coder made no progress in ``agent.max_idle_dispatches`` dispatches in a row: the
    run stops as ``needs_input`` (exit 1) with the blocker as its error; the summary, marker
    and journal say ``no_progress`` as for an interruption, so once a person has removed the
    blocker ``cairn resume`` continues it."""
    write_run_summary(ctx, "needs_input", "no_progress")
    detail = _detail(ctx, "no_progress")
    runstate.interrupt(ctx.ref, ctx.lease, "no_progress", ctx.last_snapshot, detail)
    ctx.sink.event(
        "needs_input",
        reason="no_progress",
        error=detail,
        blocker=ctx.idle.blocker(),
        next_command=f"cairn resume {ctx.ref.ticket}",
    )
    return _outcome(ctx, "needs_input", "no_progress", ExitCode.FAILURE)


def _detail(ctx: RunContext, reason: str | None) -> str | None:
    """The error text a cutoff of ``reason`` shows: the agent's, the budget's, or the
    blocker."""
    return ctx.last_error if reason in DETAILED else None


def disk_full(ctx: RunContext, error: OSError) -> RunOutcome:
    """The disk filled up (cairn's own write failed with ENOSPC): a cutoff like any other, as
    far as the disk lets it be recorded. The agent is already stopped; a snapshot is attempted,
    the summary, marker and journal say ``disk_full`` if they can still be written (otherwise
    the marker's dead owner tells the next reader the run was interrupted), and the run stops,
    resumable."""
    where = f" writing {error.filename}" if error.filename else ""
    ctx.sink.event(
        "warning",
        message=f"disk full{where}: the run stops here; free some space, then cairn resume "
        f"{ctx.ref.ticket}",
    )
    snap = snapshot(ctx, "cutoff: disk_full")
    try:
        runstate.interrupt(ctx.ref, ctx.lease, "disk_full", snap or ctx.last_snapshot)
    except OSError:
        ctx.lease.release()
    with contextlib.suppress(OSError):
        write_run_summary(ctx, "interrupted", "disk_full")
    return _outcome(ctx, "interrupted", "disk_full", ExitCode.INTERRUPTED)


def failed(ctx: RunContext, error: Exception) -> None:
    """An unexpected error: record it as the run's ``error`` stop; the caller raises it again.

    When even that fails, the second failure is shown (a warning through the sink, and a note
    on ``error``) and the lease is released; it never replaces the first error."""
    try:
        interrupted(ctx, "error")
    except Exception as second:
        why = f"{type(second).__name__}: {second}"
        error.add_note(f"the stop could not be recorded: {why}")
        ctx.lease.release()
        ctx.sink.event(
            "warning",
            message=f"the run failed ({type(error).__name__}: {error}) and the stop "
            f"could not be recorded: {why}",
        )


def write_run_summary(ctx: RunContext, status: RunStatus, reason: str | None) -> None:
    stats = ctx.stats
    lines = [
        f"# Run summary — ticket {ctx.ref.ticket}, run {ctx.ref.run_id}",
        "",
        f"- **Outcome:** {status}" + (f" ({reason})" if reason else ""),
        f"- **Phases:** {', '.join(stats.phases) or '(none)'}",
        f"- **Review rounds:** {stats.rounds}",
        f"- **Dispatches:** {stats.dispatches}",
        f"- **Turns:** {stats.turns}",
        f"- **Duration:** {stats.elapsed():.1f}s",
        f"- **Snapshots:** {', '.join(s[:12] for s in stats.snapshots) or '(none)'}",
        f"- **Usage:** {_usage_text(ctx) or '(not reported)'}",
        *_by_agent_lines(ctx),
        f"- **Denied tool calls:** {accounting.denials_text(ctx.denials) or '(none)'}",
        f"- **Change summary:** {ctx.ref.summary_path()}",
        "",
    ]
    runstate.write_artifact(ctx.ref, "orchestrator", "run-summary", "\n".join(lines))


def _by_agent(ctx: RunContext) -> dict[str, Any]:
    from cairn.state import journal

    events, _ = journal.read(ctx.ref.run_dir)
    return accounting.by_agent(accounting.dispatches(events))


def _by_agent_lines(ctx: RunContext) -> list[str]:
    """The run summary's usage of each agent, when the run had more than one."""
    used = _by_agent(ctx)
    if len(used) < 2:
        return []
    return [f"- **Usage of {n}:** {accounting.usage_text(u) or 'unknown'}" for n, u in used.items()]


def _usage_text(ctx: RunContext) -> str:
    return accounting.run_usage_text(ctx.run_usage(), ctx.unknown_usage)


def _outcome(ctx: RunContext, status: RunStatus, reason: str | None, code: ExitCode) -> RunOutcome:
    elapsed = ctx.stats.elapsed()
    usage = ctx.run_usage()
    ctx.sink.event(
        "run_finished",
        run=ctx.ref.run_id,
        status=status,
        elapsed=f"{elapsed:.1f}s",
        usage=usage,
        usage_text=_usage_text(ctx),
        usage_unknown=ctx.unknown_usage,
    )
    return RunOutcome(
        ticket=ctx.ref.ticket,
        run=ctx.ref.run_id,
        status=status,
        reason=reason,
        exit_code=code,
        run_dir=str(ctx.ref.run_dir),
        summary_path=str(ctx.ref.summary_path()),
        snapshot=ctx.last_snapshot.commit if ctx.last_snapshot else None,
        dispatches=ctx.stats.dispatches,
        turns=ctx.stats.turns,
        rounds=ctx.stats.rounds,
        elapsed_seconds=round(elapsed, 3),
        next_command=f"cairn resume {ctx.ref.ticket}" if status in RESUMABLE else None,
        error=_detail(ctx, reason),
        usage=usage,
        usage_unknown=ctx.unknown_usage,
        usage_by_agent=_by_agent(ctx),
        denials=ctx.denials,
        blocker=ctx.idle.blocker() if status == "needs_input" else None,
    )

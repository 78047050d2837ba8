"""``cairn run|resume --remote NAME`` (or ``[run] remote``): the run's branch, snapshot and state
pushed to that remote at its start, at every task completion, every ``[run] push_every`` and at
its end, cutoffs included, so any clone continues it (``cairn.remote.portable``, docs/ci.md).

On SIGINT or SIGTERM such a run gives its agent ``CANCEL_GRACE`` seconds to stop (not
``cutoff_timeout_ms``): a CI runner sends SIGTERM 7.5 s after SIGINT and SIGKILL 2.5 s after
that, and the cutoff's snapshot and push come first. The run's signal handler is in place from
the claim to the last push, so a signal during the claim stops the run before its agent starts
and one during the last push does not cut it short."""

from __future__ import annotations

import os
from collections.abc import Callable

import msgspec

from cairn.config.records import Config
from cairn.envnames import ENV_CHECKPOINT_DIR, ENV_CHECKPOINT_WAIT, fleet_run
from cairn.git import Repo
from cairn.remote.portable import Portable, for_resume, for_run, take_branch
from cairn.run.events import EventSink
from cairn.run.orchestrator import Orchestrator, RunOutcome
from cairn.run.orchestrator.outcome import Remote
from cairn.run.orchestrator.signals import cut_off, handling_signals
from cairn.state.layout import Layout
from cairn.util import barrier
from cairn.util.durations import parse_duration

CANCEL_GRACE = 2.0  # seconds the agent has to stop on SIGINT/SIGTERM before its group is killed
# seconds an agent's report waits for its push: one push's time limit and a snapshot's, and
# more (a report not answered by then fails closed: the run stops, docs/scale-out.md)
REPORT_WAIT = 90.0


def chosen(config: Config, given: str | None) -> str | None:
    """The remote of a run: ``--remote`` (``""``: ``--no-remote``), else ``[run] remote`` —
    but for the fleet's own runs (either engine), whose pushes the fleet makes itself."""
    if given is not None:
        return given or None
    if fleet_run(os.environ):
        return None
    return config.run.remote


def opened(
    repo: Repo,
    config: Config,
    layout: Layout,
    ticket: str,
    remote: str | None,
    *,
    new: bool,
    vet: Callable[[Layout], None] | None = None,
) -> Portable | None:
    """The run's hold on the remote, checked before anything is written (BadInput otherwise);
    the work tree is then put on ``cairn/<ticket>`` (at HEAD: no file changes) if it is not."""
    if remote is None:
        return None
    prefix = config.snapshot.ref_prefix
    if new:
        side = for_run(repo, layout, ticket, remote, prefix)
    else:
        side = for_resume(repo, layout, ticket, remote, prefix, vet)
    take_branch(side)
    return side


def execute(
    orchestrator: Orchestrator,
    side: Portable | None,
    sink: EventSink,
    phase: str = "implement",
    round: int = 1,
) -> RunOutcome:
    """The orchestrator's run, with the pushes of ``side`` around and beside it."""
    if side is None:
        return orchestrator.execute(phase, round)
    from cairn.remote.pusher import Pusher

    ctx = orchestrator.ctx
    for note in side.notes:
        sink.event("note", message=note)
    ctx.signal_grace = min(CANCEL_GRACE, ctx.grace)
    every = parse_duration(ctx.config.run.push_every)

    def warn(message: str) -> None:
        sink.event("warning", message=message)

    asks = ctx.ref.layout.root / "checkpoint-requests" / side.ticket
    barrier.reset(asks)  # the requests of an earlier run here died with their asker
    ctx.agent_env = {ENV_CHECKPOINT_DIR: str(asks), ENV_CHECKPOINT_WAIT: f"{REPORT_WAIT:g}"}

    def fenced(why: str) -> None:
        cut_off(ctx, "fenced", why)

    pusher = Pusher(side, ctx.ref, every, warn, fenced, asks)
    # the run's own signal handling from the claim to the last push: a SIGINT or SIGTERM during
    # the claim stops the run before its agent starts; one after the loop changes nothing (the
    # handler never ends the process), so the last push is never cut short
    with handling_signals(ctx):
        # the claim: this run's first state commit, a generation above the remote's; refused
        # when another machine pushed since the look, which stops the run before its agent
        pusher.push("run started", save=False)
        pusher.start()
        try:
            outcome = orchestrator.execute(phase, round)
        finally:
            pusher.finish(f"run ended ({ctx.signalled or 'its own end'})")
    last = pusher.last
    remote = Remote(
        name=side.remote,
        branch=side.branch,
        pushed=pusher.failing is None and pusher.fenced is None,
        commit=last.branch if last else None,
        snapshot=last.snapshot if last else None,
        state=last.state if last else None,
        error=pusher.failing,
        fenced=pusher.fenced,
    )
    resumes = outcome.next_command is not None and outcome.next_command.startswith("cairn resume")
    then = side.next_command() if resumes and pusher.fenced is None else outcome.next_command
    if pusher.fenced is not None:
        then = f"cairn catchup {side.ticket} --remote {side.remote}"
    return msgspec.structs.replace(outcome, remote=remote, next_command=then)

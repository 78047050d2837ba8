"""SIGINT and SIGTERM to cairn during a run; SIGUSR1 and SIGUSR2: the fleet supervisor's stall
and budget signals.

The first signal stops the dispatch in flight (SIGTERM to the agent's process group, SIGKILL
after ``cutoff_timeout_ms``) and makes the run stop, resumable, once its state is saved; a
second one kills the agent at once. The state files are written atomically either way.
SIGUSR1 stops the run the same way with the cutoff reason ``stall`` (the summary says
``Interrupted — stall``); a repeated SIGUSR1 changes nothing. SIGUSR2 says the fleet's spend
reached ``fleet.max_cost_usd``: the turn in flight finishes, then the run stops as a ``budget``
cutoff (resumable), as when its own cost passes ``agent.max_cost_usd``.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from cairn.run.orchestrator.context import RunContext
from cairn.terms import CutoffReason

SIGNALS = (signal.SIGINT, signal.SIGTERM)
STALL_SIGNAL = signal.SIGUSR1
BUDGET_SIGNAL = signal.SIGUSR2
FLEET_BUDGET = "the fleet's spend reached fleet.max_cost_usd"


class SignalHandler:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        running = self.ctx.running
        if signum == BUDGET_SIGNAL:  # the dispatch stops at its next turn's end
            if not self.ctx.over_budget:
                self.ctx.over_budget = True
                self.ctx.last_error = FLEET_BUDGET
            return
        reason: CutoffReason = "stall" if signum == STALL_SIGNAL else "signal"
        if self.ctx.signalled is None:
            grace = self.ctx.signal_grace if reason == "signal" else None
            cut_off(self.ctx, reason, grace=grace)
        elif running is not None and reason == "signal":
            running.interrupt("interrupted", 0)


def cut_off(
    ctx: RunContext, reason: CutoffReason, detail: str | None = None, grace: float | None = None
) -> None:
    """Make the run stop, resumable, as a cutoff for ``reason``: the dispatch in flight is
    stopped (its agent gets ``grace`` seconds, default ``ctx.grace``) and no other starts. From
    a signal handler, or another thread (a --remote run's refused push: ``fenced``)."""
    if ctx.signalled is not None:
        return
    if detail is not None:
        ctx.last_error = detail
    ctx.signalled = reason
    running = ctx.running
    if running is not None:
        running.interrupt("interrupted", ctx.grace if grace is None else grace)


def ignore_stall_signal() -> None:
    """Until a run's loop handles SIGUSR1 and SIGUSR2, the supervisor's signals must not kill
    cairn (their default action): it may send them while the run is still starting."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(STALL_SIGNAL, signal.SIG_IGN)
        signal.signal(BUDGET_SIGNAL, signal.SIG_IGN)


@contextmanager
def handling_signals(ctx: RunContext) -> Iterator[None]:
    """SIGINT, SIGTERM, SIGUSR1 and SIGUSR2 go to a ``SignalHandler`` for the duration; the
    handlers before are restored after. Only the main thread can install handlers: elsewhere
    this does nothing. Nested (a --remote run's, around the loop's), the inner one hands back
    to the outer: the handler never ends the process, so what follows the loop (its last push)
    runs to its end."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = SignalHandler(ctx)
    previous = {
        signum: signal.signal(signum, handler) for signum in (*SIGNALS, STALL_SIGNAL, BUDGET_SIGNAL)
    }
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)

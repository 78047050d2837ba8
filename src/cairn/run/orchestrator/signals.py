"""SIGINT and SIGTERM to cairn during a run, and SIGUSR1: the fleet supervisor's stall signal.

The first signal stops the dispatch in flight (SIGTERM to the agent's process group, SIGKILL
after ``cutoff_timeout_ms``) and makes the run stop, resumable, once its state is saved; a
second one kills the agent at once. The state files are written atomically either way.
SIGUSR1 stops the run the same way with the cutoff reason ``stall`` (the summary says
``Interrupted — stall``); a repeated SIGUSR1 changes nothing.
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


class SignalHandler:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        running = self.ctx.running
        reason: CutoffReason = "stall" if signum == STALL_SIGNAL else "signal"
        if self.ctx.signalled is None:
            self.ctx.signalled = reason
            if running is not None:
                running.interrupt("interrupted", self.ctx.grace)
        elif running is not None and reason == "signal":
            running.interrupt("interrupted", 0)


def ignore_stall_signal() -> None:
    """Until a run's loop handles SIGUSR1, a stall signal must not kill cairn (its default
    action): the supervisor may send it while the run is still starting."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(STALL_SIGNAL, signal.SIG_IGN)


@contextmanager
def handling_signals(ctx: RunContext) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGUSR1 go to a ``SignalHandler`` for the duration; the handlers
    before are restored after. Only the main thread can install handlers: elsewhere this does
    nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = SignalHandler(ctx)
    previous = {signum: signal.signal(signum, handler) for signum in (*SIGNALS, STALL_SIGNAL)}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)

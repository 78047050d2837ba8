"""SIGINT and SIGTERM to cairn during a run.

The first signal stops the dispatch in flight (SIGTERM to the agent's process group, SIGKILL
after ``cutoff_timeout_ms``) and makes the run stop, resumable, once its state is saved; a
second one kills the agent at once. The state files are written atomically either way.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from cairn.run.orchestrator.context import RunContext

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class SignalHandler:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        running = self.ctx.running
        if self.ctx.signalled is None:
            self.ctx.signalled = "signal"
            if running is not None:
                running.interrupt("interrupted", self.ctx.grace)
        elif running is not None:
            running.interrupt("interrupted", 0)


@contextmanager
def handling_signals(ctx: RunContext) -> Iterator[None]:
    """SIGINT and SIGTERM go to a ``SignalHandler`` for the duration; the handlers before are
    restored after. Only the main thread can install handlers: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = SignalHandler(ctx)
    previous = {signum: signal.signal(signum, handler) for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)

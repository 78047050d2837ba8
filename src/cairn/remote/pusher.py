"""The pushes of a run with ``--remote``, from a thread beside the run: a checkpoint every
``[run] push_every``, one at once when the agent's ``cairn task done|skip|defer`` asks for it
(``cairn.util.barrier``: the report returns once its push is made, so a completion the agent
was told of is on the remote before it goes on) or a task is seen newly completed otherwise,
and the last one when the run ends (its own cutoff or completion snapshot, pushed as it is).

A push that fails (the network, the remote, its credentials) is a warning, said once, then
retried every ``RETRY`` seconds (at most ``push_every``) while the run goes on; the first push
that succeeds again says so. The reports waiting for it are answered all the same: the run goes
on, its completions here, on the remote with the next push that gets there. A push refused
because the remote's refs moved (another machine took the ticket: fencing) stops the run
(``fenced``) and no push follows."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from cairn.errors import GitError, SaveTimeout
from cairn.remote.checkpoint import Pushed
from cairn.remote.portable import Portable
from cairn.remote.refs import Fenced, PushFailed
from cairn.state.runstate import RunRef
from cairn.util import barrier

TICK = 0.1  # seconds between looks for a report's request and a newly completed task
RETRY = 30.0  # seconds between the tries of a push that failed (at most push_every)


class Pusher:
    """``side``'s pushes while run ``ref`` goes on; ``warn`` says a line to the run's output,
    ``fenced`` stops the run (with why)."""

    def __init__(
        self,
        side: Portable,
        ref: RunRef,
        every: float,
        warn: Callable[[str], None],
        fenced: Callable[[str], None],
        asks: Path | None = None,
    ) -> None:
        self.side, self.ref, self.every, self.asks = side, ref, every, asks
        self.warn, self.on_fenced = warn, fenced
        self.last: Pushed | None = None  # what the last push that succeeded left on the remote
        self.failing: str | None = None  # why the last push failed (None: it did not)
        self.fenced: str | None = None  # why the remote refused this run's pushes
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._seen: tuple[int, frozenset[int]] = (0, frozenset())

    def push(self, reason: str, *, save: bool) -> bool:
        """One checkpoint now; False when it failed or the run is fenced."""
        with self._lock:
            if self.fenced is not None:
                return False
            try:
                self.last = self.side.push(reason, save=save)
            except Fenced as exc:
                self.fenced = (
                    f"{self.side.remote} refused the push of ticket {self.side.ticket}: another "
                    f"machine continued it ({exc}); this run stops, its work stays here"
                )
                self.on_fenced(self.fenced)
                return False
            except (PushFailed, GitError, SaveTimeout, OSError) as exc:
                if self.failing is None:
                    self.warn(
                        f"could not push ticket {self.side.ticket} to {self.side.remote} "
                        f"({reason}): {exc}; retried every {self._retry():g}s, the run goes on"
                    )
                self.failing = str(exc)
                return False
            if self.failing is not None:
                self.warn(
                    f"pushed ticket {self.side.ticket} to {self.side.remote} again ({reason})"
                )
                self.failing = None
            return True

    def start(self) -> None:
        self._seen = (self._signature(), self._completed())
        self._thread = threading.Thread(target=self._loop, name="cairn-push", daemon=True)
        self._thread.start()

    def finish(self, reason: str) -> None:
        """Stop the thread (its push in flight ends first), then the last push: the run's own
        last snapshot, as it is."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        waiting = self._waiting()
        self.push(reason, save=False)
        barrier.release(waiting)

    def _retry(self) -> float:
        return min(RETRY, self.every)

    def _loop(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(TICK):
            waiting = self._waiting()  # only the requests made before this push begins
            new = self._newly_completed()
            wait = self._retry() if self.failing is not None else self.every
            if not waiting and not new and time.monotonic() - last < wait:
                continue
            reason = "a report" if waiting else f"task {max(new)} done" if new else "checkpoint"
            self.push(reason, save=True)
            barrier.release(waiting)
            last = time.monotonic()
            if self.fenced is not None:
                return

    def _waiting(self) -> list[Path]:
        return barrier.pending(self.asks) if self.asks is not None else []

    def _newly_completed(self) -> frozenset[int]:
        """The tasks completed since the last look (the summary is read only when the run
        directory changed: every summary write replaces a file there)."""
        signature = self._signature()
        if signature == self._seen[0]:
            return frozenset()
        done = self._completed()
        new = done - self._seen[1]
        self._seen = (signature, done)
        return new

    def _signature(self) -> int:
        try:
            return self.ref.run_dir.stat().st_mtime_ns
        except OSError:
            return 0

    def _completed(self) -> frozenset[int]:
        try:
            tasks = self.ref.load_summary()[1].tasks
        except Exception:  # a summary being replaced this instant: the next look has it
            return self._seen[1]
        return frozenset(task.number for task in tasks if task.status == "completed")

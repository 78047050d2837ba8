"""What every git process cairn runs shares: deadlines, results, and stopping a process."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

from cairn.git.result import GitResult as GitResult
from cairn.git.result import telling_line as telling_line
from cairn.util.procs import kill_group

if TYPE_CHECKING:
    import subprocess


class Deadline:
    """A wall-clock budget shared by every git call of one operation."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._end = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float | None:
        if self._end is None:
            return None
        return self._end - time.monotonic()

    def expired(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0


def kill_and_reap(proc: subprocess.Popen[bytes]) -> None:
    """Kill a git process with its process group, and collect it."""
    kill_group(proc.pid)
    proc.kill()
    proc.communicate()


class Pending(Protocol):
    """A git command started earlier and read now (``sessions.Started``, ``early.Spawned``)."""

    args: list[str]

    def result(self, *, check: bool = True, deadline: Deadline | None = None) -> GitResult: ...

    def abandon(self) -> None: ...

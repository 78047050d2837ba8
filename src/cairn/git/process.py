"""What every git process cairn runs shares: deadlines, results, and stopping a process."""

from __future__ import annotations

import subprocess
import time
from typing import NamedTuple, Protocol

from cairn.util.procs import kill_group


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


class GitResult(NamedTuple):
    args: list[str]
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "surrogateescape").strip()

    @property
    def error_text(self) -> str:
        return self.stderr.decode("utf-8", "replace").strip()

    @property
    def error_line(self) -> str:
        """The line of stderr that names the problem (git ends with hints and usage notes)."""
        return telling_line(self.error_text) or f"exit status {self.returncode}"


def telling_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for prefix in ("fatal:", "error:", "! ["):
        for line in lines:
            if line.startswith(prefix):
                return line
    return next((line for line in lines if not line.startswith("hint:")), "")


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

"""How cairn starts a git process, in one place: ``start`` (``subprocess``, in its own session,
stdout and stderr on pipes) gives a ``Started`` that ``Git.run``, ``Git.start`` and the save's
early start (``cairn.git.status``) read with a ``Deadline``; when time runs out, or the caller
no longer needs it, the process is killed with its whole process group. Light on purpose (no
``typing`` at run time): the save starts ``git status`` from here before the rest of cairn is
imported."""

from __future__ import annotations

import subprocess
import time

from cairn.git.result import GitResult as GitResult
from cairn.git.result import telling_line as telling_line

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path
    from typing import IO


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


def popen(
    argv: Sequence[str],
    cwd: Path | str,
    env: Mapping[str, str],
    *,
    stdin: int = subprocess.DEVNULL,
    stderr: int | IO[bytes] = subprocess.PIPE,
    keep_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """``argv`` started in ``cwd`` in a session of its own (so that it can be killed with what
    it starts), its stdout (and by default its stderr) on a pipe; ``keep_fds`` are passed on
    to it. CairnError when git is not installed."""
    try:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
            pass_fds=tuple(keep_fds),
        )
    except FileNotFoundError as exc:
        from cairn.errors import CairnError

        raise CairnError("git is not installed or not on PATH; install git 2.31+") from exc


def kill_and_reap(proc: subprocess.Popen[bytes]) -> None:
    """Kill a git process with its process group, and collect it."""
    from cairn.util.procs import kill_group

    kill_group(proc.pid)
    proc.kill()
    proc.communicate()


def timed_out(args: Sequence[str]) -> Exception:
    from cairn.errors import SaveTimeout

    return SaveTimeout(f"`git {args[0]}` did not finish within the time budget")


class Started:
    """A git command started now (no input) and read later: ``result`` waits for it like
    ``Git.run`` would, ``head`` reads the start of its output, ``abandon`` stops it when the
    caller no longer needs it."""

    def __init__(self, args: list[str], proc: subprocess.Popen[bytes]) -> None:
        self.args = args
        self.proc = proc
        self._result: GitResult | None = None

    def result(self, *, check: bool = True, deadline: Deadline | None = None) -> GitResult:
        if self._result is None:
            timeout = deadline.remaining() if deadline is not None else None
            try:
                if timeout is not None and timeout <= 0:
                    raise subprocess.TimeoutExpired(self.args, 0)
                out, err = self.proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                kill_and_reap(self.proc)
                raise timed_out(self.args) from None
            except BaseException:
                kill_and_reap(self.proc)
                raise
            self._result = GitResult(self.args, self.proc.returncode, out, err)
        if check and not self._result.ok:
            from cairn.errors import GitError

            raise GitError(self.args, self._result.returncode, self._result.error_line)
        return self._result

    def head(self, limit: int) -> tuple[GitResult, bool]:
        """At most ``limit`` bytes of the command's output, read as it comes, and whether
        there was more: then the command is stopped at once, so no more than ``limit`` bytes
        (and a pipe's worth) are ever held, however long the output."""
        assert self.proc.stdout is not None
        try:
            data = self.proc.stdout.read(limit + 1)  # returns short only at the end
        except BaseException:
            kill_and_reap(self.proc)
            raise
        cut = len(data) > limit
        if cut:
            kill_and_reap(self.proc)
            return GitResult(self.args, self.proc.returncode, data[:limit], b""), True
        rest, err = self.proc.communicate()
        return GitResult(self.args, self.proc.returncode, data + rest, err), False

    def abandon(self) -> None:
        if self.proc.returncode is None:
            kill_and_reap(self.proc)

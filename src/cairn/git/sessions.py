"""git processes that outlive one call: a command started now and read later (``Started``),
and a ``--batch`` process spoken to request by request (``Session``). ``cairn.git.Git`` makes them
(``Git.start``, ``Git.session``); they live here so that a command that needs neither does not
import ``threading`` for them.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, NoReturn

from cairn.errors import GitError, SaveTimeout
from cairn.git.process import Deadline, GitResult, kill_and_reap, telling_line
from cairn.util.procs import kill_group


class Started:
    """A git command started by ``Git.start``. ``result`` waits for it like ``Git.run`` would;
    ``abandon`` stops it when the caller no longer needs it."""

    def __init__(self, args: list[str], proc: subprocess.Popen[bytes]) -> None:
        self.args = args
        self._proc = proc

    def result(self, *, check: bool = True, deadline: Deadline | None = None) -> GitResult:
        timeout = deadline.remaining() if deadline is not None else None
        try:
            if timeout is not None and timeout <= 0:
                raise subprocess.TimeoutExpired(self.args, 0)
            out, err = self._proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_and_reap(self._proc)
            name = self.args[0]
            raise SaveTimeout(f"`git {name}` did not finish within the time budget") from None
        except BaseException:
            kill_and_reap(self._proc)
            raise
        result = GitResult(self.args, self._proc.returncode, out, err)
        if check and not result.ok:
            raise GitError(self.args, result.returncode, result.error_line)
        return result

    def head(self, limit: int) -> tuple[GitResult, bool]:
        """At most ``limit`` bytes of the command's output, read as it comes, and whether
        there was more: then the command is stopped at once, so no more than ``limit`` bytes
        (and a pipe's worth) are ever held, however long the output."""
        assert self._proc.stdout is not None
        try:
            data = self._proc.stdout.read(limit + 1)  # returns short only at the end
        except BaseException:
            kill_and_reap(self._proc)
            raise
        cut = len(data) > limit
        if cut:
            kill_and_reap(self._proc)
            return GitResult(self.args, self._proc.returncode, data[:limit], b""), True
        rest, err = self._proc.communicate()
        return GitResult(self.args, self._proc.returncode, data + rest, err), False

    def abandon(self) -> None:
        if self._proc.returncode is None:
            kill_and_reap(self._proc)


class Session:
    """A git process spoken to request by request. When the deadline passes it is killed with
    its process group, and the read that was waiting raises SaveTimeout."""

    def __init__(
        self,
        argv: list[str],
        name: str,
        cwd: Path,
        env: Mapping[str, str],
        deadline: Deadline | None,
    ) -> None:
        self.name = name
        self._stderr = _anonymous_file()
        self._proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,
        )
        self._closed = False
        self._expired = False
        self._timer: threading.Timer | None = None
        left = deadline.remaining() if deadline else None
        if left is not None:
            self._timer = threading.Timer(max(left, 0), self._expire)
            self._timer.daemon = True
            self._timer.start()

    def _expire(self) -> None:
        self._expired = True
        kill_group(self._proc.pid)

    def send(self, data: bytes) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
        except BrokenPipeError:
            self._fail()

    def readline(self) -> bytes:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line.endswith(b"\n"):
            self._fail()
        return line[:-1]

    def read(self, size: int) -> bytes:
        assert self._proc.stdout is not None
        data = self._proc.stdout.read(size)
        if len(data) != size:
            self._fail()
        return data

    def _fail(self) -> NoReturn:
        self.close()
        if self._expired:
            raise SaveTimeout(f"`git {self.name}` did not finish within the time budget")
        self._stderr.seek(0)
        problem = telling_line(self._stderr.read().decode("utf-8", "replace"))
        raise GitError([self.name], self._proc.returncode or 1, problem or "unexpected end")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        with contextlib.suppress(OSError):
            assert self._proc.stdin is not None
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kill_and_reap(self._proc)
        assert self._proc.stdout is not None
        self._proc.stdout.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        self._stderr.close()


def _anonymous_file() -> IO[bytes]:
    """A file with no name, for a session's stderr: in memory on Linux, where importing
    ``tempfile`` (with ``shutil`` and ``random``) would cost a snapshot ~3 ms."""
    if hasattr(os, "memfd_create"):
        return os.fdopen(os.memfd_create("cairn-git-stderr", os.MFD_CLOEXEC), "w+b")
    import tempfile

    return tempfile.TemporaryFile()

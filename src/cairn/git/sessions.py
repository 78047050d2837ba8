"""A ``--batch`` git process spoken to request by request (``Session``, made by
``Git.session``), with a timer that kills it when the deadline passes."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, NoReturn

from cairn.errors import GitError, SaveTimeout
from cairn.git.process import Deadline, kill_and_reap, popen, telling_line
from cairn.util.procs import kill_group


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
        self._proc = popen(argv, cwd, env, stdin=subprocess.PIPE, stderr=self._stderr)
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

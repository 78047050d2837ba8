"""A git command started with ``os.posix_spawn``: for the command that should start before the
rest of cairn is imported (a snapshot's ``git status``, ``cairn.git.status``), since importing
``subprocess`` costs a short-lived command as much as several milliseconds. Read later like
``cairn.git.sessions.Started``: ``result`` waits (with a deadline) and ``abandon`` stops it."""

from __future__ import annotations

import os
from time import monotonic as time_now

from cairn.git.result import GitResult

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from collections.abc import Mapping

    from cairn.git.process import Deadline


class Spawned:
    """``git <args>`` running in its own session, its stdout and stderr on pipes."""

    def __init__(self, argv: list[str], args: list[str], cwd: str, env: Mapping[str, str]) -> None:
        self.args = args
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            self.pid = os.posix_spawnp(
                argv[0],
                [argv[0], "-C", cwd, *argv[1:]],
                dict(env),
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, out_w, 1),
                    (os.POSIX_SPAWN_DUP2, err_w, 2),
                ],
                setsid=True,
            )
        except BaseException:
            for fd in (out_r, err_r):
                os.close(fd)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        self._fds = {out_r: bytearray(), err_r: bytearray()}
        self._open = {out_r, err_r}  # not yet at end of file
        self._out, self._err = out_r, err_r
        self.returncode: int | None = None
        self._result: GitResult | None = None

    def wait(self, until: float | None) -> bool:
        """Read its output until it ends or ``time.monotonic()`` passes ``until`` (None: no
        limit); whether it ended. It keeps running otherwise: ``result`` reads on."""
        import selectors

        with selectors.DefaultSelector() as selector:
            for fd in self._open:
                selector.register(fd, selectors.EVENT_READ)
            while self._open:
                timeout = None if until is None else until - time_now()
                if timeout is not None and timeout <= 0:
                    return False
                for key, _ in selector.select(timeout):
                    chunk = os.read(key.fd, 1 << 16)
                    if chunk:
                        self._fds[key.fd] += chunk
                    else:
                        selector.unregister(key.fd)
                        self._open.remove(key.fd)
        self._reap()
        return True

    def result(self, *, check: bool = True, deadline: Deadline | None = None) -> GitResult:
        if self._result is None:
            left = deadline.remaining() if deadline is not None else None
            if not self.wait(None if left is None else time_now() + left):
                from cairn.errors import SaveTimeout

                self.abandon()
                raise SaveTimeout(f"`git {self.args[0]}` did not finish within the time budget")
            code = self.returncode if self.returncode is not None else -9
            out, err = bytes(self._fds[self._out]), bytes(self._fds[self._err])
            self._result = GitResult(self.args, code, out, err)
        if check and not self._result.ok:
            from cairn.errors import GitError

            raise GitError(self.args, self._result.returncode, self._result.error_line)
        return self._result

    def abandon(self) -> None:
        import contextlib
        import signal

        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            self._reap()

    def _reap(self) -> None:
        import contextlib

        if self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        self._open.clear()
        for fd in (self._out, self._err):
            with contextlib.suppress(OSError):
                os.close(fd)

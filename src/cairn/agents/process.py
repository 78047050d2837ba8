"""Subprocess plumbing shared by the adapters that run a local program.

Every agent runs in its own process group (``start_new_session``), so that stopping it also stops
whatever it started. ``terminate`` sends SIGTERM to the group at once and SIGKILL after a grace
period from a timer thread, so it returns immediately and is safe to call from a signal handler.
``Child.lines`` reads the agent's stdout without blocking past the agent's own exit: a grandchild
that kept the pipe open cannot hang the reader.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import tempfile
import threading
from abc import abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from cairn.agents import limits, transcript
from cairn.agents.base import Denial, Dispatch, DispatchRequest, Event, Result, Usage
from cairn.terms import StopReason
from cairn.util.procs import kill_group, signal_group

POLL_INTERVAL = 0.05
STDERR_TAIL = 2000


def terminate(proc: subprocess.Popen[bytes], grace: float) -> threading.Timer:
    """SIGTERM to the process group now, SIGKILL to the group after ``grace`` seconds.

    Returns at once: the SIGKILL comes from a daemon timer thread. The group is killed even when
    its leader is already gone, so nothing the agent started outlives it.
    """
    signal_group(proc.pid, signal.SIGTERM)
    timer = threading.Timer(max(0.0, grace), signal_group, (proc.pid, signal.SIGKILL))
    timer.daemon = True
    timer.start()
    return timer


def classify(returncode: int, interrupt: StopReason | None = None) -> StopReason | None:
    """How a child's exit ends a dispatch: None when it exited 0 and nobody interrupted it,
    else the interrupt's reason, ``crashed`` (killed by a signal) or ``error`` (non-zero exit)."""
    if interrupt is not None:
        return interrupt
    if returncode == 0:
        return None
    return "crashed" if returncode < 0 else "error"


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exit status {returncode}"


def reason_line(tail: str) -> str:
    """The line of a child's stderr ``tail`` that says why it failed: its last line, but above
    a backtrace (a Rust program's ``Stack backtrace:`` and frames when ``RUST_BACKTRACE`` is
    set, as Codex prints them; a panic's ``stack backtrace:``): the line before it."""
    lines = [line for line in tail.splitlines() if line.strip()]
    for at, line in enumerate(lines):
        if line.strip().lower() == "stack backtrace:" and at:
            lines = lines[:at]
            break
    return lines[-1].strip() if lines else ""


class Child:
    """One agent process in its own group: stdout as a pipe, stderr to an anonymous temp file
    (so a chatty agent never blocks on a pipe nobody reads), env = ``os.environ`` + ``env``."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        stdin: int | IO[bytes] | None = subprocess.PIPE,
    ) -> None:
        self._errfile = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        try:
            self.proc: subprocess.Popen[bytes] = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env={**os.environ, **(env or {})},
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=self._errfile,
                start_new_session=True,
            )
        except BaseException:
            self._errfile.close()
            raise
        assert self.proc.stdout is not None
        self._fd = self.proc.stdout.fileno()
        os.set_blocking(self._fd, False)
        self._buffer = bytearray()
        self._eof = False
        self._timers: list[threading.Timer] = []

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def send(self, data: bytes) -> bool:
        """Write to the child's stdin; False when it is gone (broken pipe)."""
        stdin = self.proc.stdin
        if stdin is None or stdin.closed:
            return False
        try:
            stdin.write(data)
            stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            return False
        return True

    def close_stdin(self) -> None:
        stdin = self.proc.stdin
        if stdin is not None and not stdin.closed:
            with contextlib.suppress(OSError):
                stdin.close()

    def terminate(self, grace: float) -> None:
        self._timers.append(terminate(self.proc, grace))

    def lines(self) -> Iterator[str]:
        """Lines of stdout (without the newline) until EOF, or until the child has exited and
        what it wrote is drained. Resumable: stop iterating, write to stdin, iterate again."""
        while True:
            end = self._buffer.find(b"\n")
            while end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                yield line.decode("utf-8", "replace")
                end = self._buffer.find(b"\n")
            if self._eof:
                if self._buffer:
                    line = bytes(self._buffer)
                    self._buffer.clear()
                    yield line.decode("utf-8", "replace")
                return
            if self._readable(POLL_INTERVAL):
                self._read_available()
            elif self.proc.poll() is not None:
                # Exited: whatever it wrote is in the pipe already; a grandchild holding the
                # write end must not keep us waiting for an EOF that never comes.
                self._read_available()
                self._eof = True

    def _readable(self, timeout: float) -> bool:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        try:
            return bool(poller.poll(timeout * 1000))
        except InterruptedError:  # pragma: no cover - PEP 475 retries, kept for safety
            return False

    def _read_available(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                self._eof = True
                return
            if not chunk:
                self._eof = True
                return
            self._buffer += chunk

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit status, or None when the child is still running after ``timeout``."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace: float) -> int:
        """Stop the child for good (SIGTERM, SIGKILL after ``grace``) and reap it."""
        if self.proc.poll() is None:
            self.terminate(grace)
        return self.proc.wait()

    def kill(self) -> None:
        """SIGKILL the whole group and reap the leader (used when a dispatch is abandoned)."""
        kill_group(self.proc.pid)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait()

    def stderr_tail(self, limit: int = STDERR_TAIL) -> str:
        """The end of what the child wrote on stderr (for a failed dispatch's detail)."""
        with contextlib.suppress(OSError, ValueError):
            size = self._errfile.seek(0, os.SEEK_END)
            self._errfile.seek(max(0, size - limit * 4))
            return self._errfile.read().decode("utf-8", "replace")[-limit:].strip()
        return ""

    def with_stderr(self, detail: str) -> str:
        """``detail``, then the last line the child wrote on stderr (if it wrote any) that says
        why (``reason_line``)."""
        line = reason_line(self.stderr_tail())
        return f"{detail}: {line}" if line else detail

    def close(self) -> None:
        """Kill whatever is left of the group (the leader too, if still running), cancel the
        pending SIGKILL timers and release the pipes."""
        if self.proc.poll() is None:
            self.kill()
        else:
            kill_group(self.proc.pid)
        for timer in self._timers:
            timer.cancel()
        self.close_stdin()
        if self.proc.stdout is not None:
            with contextlib.suppress(OSError):
                self.proc.stdout.close()
        self._errfile.close()


class ChildDispatch(Dispatch):
    """A running dispatch (one agent invocation for a role, possibly several turns) whose agent
    runs as one child process at a time (``self._child``): its pid, a non-blocking interrupt,
    cleanup of the child however ``events()`` ends, and the result."""

    def __init__(self, request: DispatchRequest, argv: list[str]) -> None:
        self.request = request
        self.argv = argv
        self.result: Result | None = None
        self._interrupt: StopReason | None = None
        self._grace = 0.0
        self._child: Child | None = None
        self._turns = 0
        self._final: str | None = None
        self._session_id: str | None = None  # the agent's own conversation id, if it has one
        self._usage = Usage()
        self._usage_seen = False  # the agent reported some usage (else it is unknown)
        self._session_cost = request.session_cost_usd if request.session_id else None
        self._denials: list[Denial] = []
        self._transcript = transcript.open_for(request.transcript)

    @property
    def pid(self) -> int | None:
        child = self._child
        return child.pid if child is not None else None

    def interrupt(self, reason: StopReason, grace: float) -> None:
        if self.result is not None:
            return
        if self._interrupt is None:
            self._interrupt = reason
        self._grace = grace
        child = self._child
        if child is not None:
            child.terminate(grace)

    def events(self) -> Iterator[Event]:
        if self.result is not None:
            return
        try:
            yield from self._run()
        finally:
            if self._child is not None:
                self._child.close()
            if self._transcript is not None:
                self._transcript.close()

    def _used(self, usage: Usage) -> None:
        """Count what one turn or invocation reported it used."""
        self._usage = self._usage + usage
        self._usage_seen = True

    def _keep(self, line: str) -> None:
        """Tee one line of the agent's event stream into the dispatch's transcript."""
        if self._transcript is not None:
            self._transcript.write(line)

    @abstractmethod
    def _run(self) -> Iterator[Event]:
        """The agent's events; sets ``result`` (through ``_set``) before it returns."""

    def _set(
        self,
        reason: StopReason,
        exit_code: int | None = None,
        detail: str | None = None,
        failure: limits.Failure | None = None,
    ) -> None:
        """The result. ``failure``: what the adapter knows the failure was; an ``error``
        without one is classified from ``detail``."""
        if failure is None and reason == "error":
            failure = limits.classify(detail)
        self.result = Result(
            reason=reason,
            num_turns=self._turns,
            final_message=self._final,
            session_id=self._session_id,
            exit_code=exit_code,
            usage=self._usage if self._usage_seen else None,
            detail=detail,
            denials=tuple(self._denials),
            transcript=self._transcript_name(),
            session_cost_usd=self._session_cost,
            failure=failure,
        )

    def _transcript_name(self) -> str | None:
        path = self.request.transcript
        return path.name if path is not None and path.exists() else None

"""One attempt at a ticket: a child ``python -m cairn run|resume … --json`` in the ticket's
worktree, in its own process group, and what the supervisor watches of it: its JSON lines (each
one is progress; the last is the outcome), its journal's and marker's mtimes, its exit code.

A child the supervisor did not start (an orphan of a killed supervisor, still running) is
``Adopted``: only its pid and its files can be watched, and its outcome is read from the files.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from cairn.state import journal, marker
from cairn.state.layout import JOURNAL, Layout
from cairn.util.procs import pid_alive, process_start_time

STDERR_LINES = 20
# What the child must not inherit from the supervisor's environment: its run is its own.
INHERITED_CAIRN = ("CAIRN_DEBUG",)


def child_env() -> dict[str, str]:
    return {
        k: v for k, v in os.environ.items() if not k.startswith("CAIRN_") or k in INHERITED_CAIRN
    }


class Watched:
    """What the supervisor asks of any attempt in flight."""

    ticket: str
    pid: int
    stall_sent_at: float | None = None
    exit_code: int | None = None  # once it has exited; None for an adopted child

    def __init__(self, ticket: str, layout: Layout) -> None:
        self.ticket, self.layout = ticket, layout
        self.run_id: str | None = None
        self.last_progress = time.monotonic()
        self._mtimes: tuple[float, float] = (0.0, 0.0)

    def poll(self) -> bool:
        """Whether the child has exited (and, for an attempt, its output is read)."""
        raise NotImplementedError

    def _files_moved(self) -> bool:
        """Whether the ticket's marker or journal changed since the last look."""
        marker = self.layout.marker_path(self.ticket)
        run_id = self.run_id or self.layout.latest_run(self.ticket)
        stamps = [0.0, 0.0]
        with contextlib.suppress(OSError):
            stamps[0] = marker.stat().st_mtime
        if run_id is not None:
            with contextlib.suppress(OSError):
                stamps[1] = (self.layout.run_dir(self.ticket, run_id) / JOURNAL).stat().st_mtime
        moved = tuple(stamps) != self._mtimes
        self._mtimes = (stamps[0], stamps[1])
        return moved

    def idle(self) -> float:
        """Seconds since the last sign of progress (a JSON event, a journal or marker write)."""
        if self._files_moved():
            self.last_progress = time.monotonic()
        return time.monotonic() - self.last_progress

    def signal(self, sig: signal.Signals) -> bool:
        """Send ``sig`` to the child cairn alone (it stops its agent itself)."""
        try:
            os.kill(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def kill(self) -> None:
        """SIGKILL the child's process group and the agent's (its own group, which the
        ticket's marker names)."""
        groups = [self.pid]
        with contextlib.suppress(Exception):  # no marker, or one being rewritten: the child only
            current = marker.read(self.layout.marker_path(self.ticket))
            if current is not None and current.dispatch is not None and current.dispatch.pid:
                groups.append(current.dispatch.pid)
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)


class Attempt(Watched):
    """A child this supervisor started and reads."""

    def __init__(
        self,
        ticket: str,
        layout: Layout,
        argv: list[str],
        cwd: Path,
        wake: threading.Event | None = None,
    ) -> None:
        super().__init__(ticket, layout)
        self.argv = argv
        self.wake = wake  # set when the child's output ends (it exited)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cairn", *argv],
            cwd=cwd,
            env=child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.pid = self.proc.pid
        self.started_at = process_start_time(self.pid)
        self.outcome: dict[str, Any] | None = None
        self.last_reason: str | None = None
        self.denied = False
        self.refusal: dict[str, Any] | None = None
        self.stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.last_progress = time.monotonic()
            with contextlib.suppress(ValueError):
                self._line(json.loads(raw))
        if self.wake is not None:
            self.wake.set()

    def _line(self, data: Any) -> None:
        if not isinstance(data, dict):
            return
        kind = data.get("event")
        if kind is None and "exit_code" in data:
            self.outcome = data
        elif kind is None and isinstance(data.get("error"), dict):
            self.refusal = data["error"]  # `cairn: error: …` as JSON: cairn's own line
        elif kind in ("run_started", "run_resumed"):
            self.run_id = str(data.get("run"))
        elif kind == "cutoff":
            self.last_reason = str(data.get("reason"))
        elif kind == "dispatch_finished":
            self.denied = bool(data.get("denials")) and data.get("reason") == "completed"

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                self.stderr.append(line)

    def poll(self) -> bool:
        code = self.proc.poll()
        if code is None:
            return False
        for reader in self._readers:
            reader.join(5)
        self.exit_code = code
        return True

    def verdict(self) -> tuple[str | None, str | None, bool]:
        """Why the attempt ended: its cutoff reason (or ``needs_manual_review``), a one-line
        detail, and whether the agent waits for a person (it stopped after denied tool calls)."""
        outcome = self.outcome
        if outcome is not None:
            if outcome.get("status") == "needs_manual_review":
                return "needs_manual_review", None, False
            reason = outcome.get("reason")
            detail = outcome.get("error")
            needs_input = self.denied and reason == "incomplete"
            if needs_input:
                denied = outcome.get("denials") or []
                names = ", ".join(f"{d.get('tool')} {d.get('target')}" for d in denied[:3])
                detail = f"the agent stopped after denied tool calls ({names})"
            return (str(reason) if reason else None), detail, needs_input
        if self.exit_code == 2:
            return None, self.error_line(), False
        return "crash", self.error_line(), False

    def error_line(self) -> str | None:
        """cairn's own error line (its ``--json`` error object), else stderr's last line."""
        if self.refusal is not None and self.refusal.get("message"):
            return str(self.refusal["message"])
        for line in reversed(self.stderr):
            if line.startswith("cairn: error: "):
                return line.removeprefix("cairn: error: ")
        return self.stderr[-1] if self.stderr else None


class Adopted(Watched):
    """A child cairn left running by a supervisor that died: watched through its pid and files."""

    def __init__(self, ticket: str, layout: Layout, pid: int) -> None:
        super().__init__(ticket, layout)
        self.pid = pid

    def poll(self) -> bool:
        return not pid_alive(self.pid)


def same_process(pid: int | None, started_at: float | None) -> bool:
    """Whether ``pid`` is alive and is the process that started at ``started_at`` (epoch s)."""
    if pid is None or not pid_alive(pid):
        return False
    if started_at is None:
        return True
    now = process_start_time(pid)
    return now is None or abs(now.timestamp() - started_at) <= 2.0


def outcome_on_disk(layout: Layout, ticket: str) -> tuple[str, str | None]:
    """How a ticket's latest run stands by its files: ``none`` (no run yet), ``completed``,
    ``needs_manual_review`` or ``interrupted``, and its last cutoff reason."""
    run_id = layout.latest_run(ticket)
    if run_id is None:
        return "none", None
    events, _ = journal.read(layout.run_dir(ticket, run_id))
    reason = None
    for event in events:
        if event.get("event") in ("cutoff", "run_interrupted"):
            reason = event.get("reason")
        if event.get("event") == "run_started":
            reason = None
    last = events[-1] if events else {}
    if last.get("event") == "run_finished" and not layout.marker_path(ticket).exists():
        return str(last.get("status", "completed")), None
    return "interrupted", reason

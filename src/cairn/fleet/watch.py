"""One attempt at a ticket: a child ``python -m cairn run|resume … --json`` in the ticket's
worktree, in its own process group, and what the supervisor watches of it: its JSON lines (each
one is progress; the last is the outcome), its journal's and marker's mtimes, its exit code.

The child's output is never a pipe the supervisor holds: its stdout (the ``--json`` lines) and
its stderr go to files of the fleet's state (``fleetstate.output_paths``), which the supervisor
tails. So the child outlives its supervisor, and whoever watches it next reads the same files:
a child the supervisor did not start (the run of a supervisor that died) is ``Adopted``,
watched through its pid and those files, its outcome read from them when it ends.

A child starts gated: ``sh`` waits for a word on its stdin before it ``exec``s cairn, and the
supervisor says it only once the child's pid is in the ticket's record. A supervisor killed in
between closes the gate's pipe, and the child ends without having started anything, so no run
ever goes on that the records do not name.
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
from pathlib import Path
from typing import Any

from cairn.errors import BadInput
from cairn.fleet import fleetstate
from cairn.fleet.fleetstate import same_process
from cairn.state import journal, marker
from cairn.state.layout import JOURNAL, Layout
from cairn.terms import (
    ENV_CRASH_AT,
    ENV_DEBUG,
    ENV_FAULT_INJECTION,
    ENV_FLEET_ATTEMPT,
    ENV_PREFIX,
    run_status,
)
from cairn.util import durable
from cairn.util.procs import process_start

__all__ = [
    "Adopted",
    "Attempt",
    "Watched",
    "child_env",
    "interruption_detail",
    "outcome_on_disk",
    "same_process",
]

STDERR_LINES = 20
CHUNK = 1024 * 1024  # the most of the child's output read at one look
# What the child must not inherit from the supervisor's environment: its run is its own.
INHERITED_CAIRN = (ENV_DEBUG, ENV_FAULT_INJECTION, ENV_CRASH_AT)  # and a test's faults
GO = b"go\n"
# Waits for GO on stdin, then becomes the child cairn (same pid, same start time).
GATE = 'IFS= read -r go && [ "$go" = go ] && exec "$@" </dev/null'


# A fleet's attempt is not a step of a GitHub Actions job, even when its supervisor is one: its
# end goes to the fleet's tracker, not to the job's step summary and the job's issue (cairn.ci).
NOT_INHERITED = ("GITHUB_ACTIONS",)


def child_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if (not k.startswith(ENV_PREFIX) or k in INHERITED_CAIRN) and k not in NOT_INHERITED
    }


class Watched:
    """What the supervisor asks of any attempt in flight, read from the child's output files."""

    pid: int
    started_at: float | None = None  # epoch seconds, by the machine's clock
    started_since_boot: float | None = None  # the same start counted from boot
    stall_sent_at: float | None = None
    exit_code: int | None = None  # once it has exited (None: killed, or no outcome was written)

    def __init__(self, ticket: str, layout: Layout) -> None:
        self.ticket, self.layout = ticket, layout
        self.out_path, self.err_path = fleetstate.output_paths(layout, ticket)
        self.run_id: str | None = None
        self.outcome: dict[str, Any] | None = None  # the run's last line: its RunOutcome
        self.refusal: dict[str, Any] | None = None  # or cairn's error object
        self.last_reason: str | None = None
        self.denied = False
        self.last_progress = time.monotonic()
        self._mtimes: tuple[float, float] = (0.0, 0.0)
        self._offset = 0
        self._partial = b""

    def poll(self) -> bool:
        """Whether the child has exited (and all of its output is read)."""
        raise NotImplementedError

    # --- its output ----------------------------------------------------------------------------

    def read_output(self) -> bool:
        """Read what the child wrote since the last look; True when it wrote anything."""
        grew = False
        while True:
            try:
                fd = durable.open_state(self.out_path, os.O_RDONLY, "fleet output")
            except (OSError, BadInput):
                return grew
            try:
                data = os.pread(fd, CHUNK, self._offset)
            finally:
                os.close(fd)
            if not data:
                return grew
            grew = True
            self._offset += len(data)
            *lines, self._partial = (self._partial + data).split(b"\n")
            for raw in lines:
                with contextlib.suppress(ValueError):
                    self._line(json.loads(raw))

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

    def written_code(self) -> int | None:
        """The exit code the child's last line states (its outcome or its error object)."""
        for said in (self.outcome, self.refusal):
            if said is not None and isinstance(said.get("exit_code"), int):
                return int(said["exit_code"])
        return None

    def stderr_lines(self) -> list[str]:
        with contextlib.suppress(OSError, BadInput):
            tail = durable.read_tail(self.err_path, "fleet output") or b""
            lines = tail.decode("utf-8", "replace").splitlines()
            return [line.rstrip() for line in lines if line.strip()][-STDERR_LINES:]
        return []

    # --- progress and signals ------------------------------------------------------------------

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
        if self.read_output() or self._files_moved():
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

    # --- its end -------------------------------------------------------------------------------

    def verdict(self) -> tuple[str | None, str | None, bool]:
        """Why the attempt ended: its cutoff reason (or ``needs_review``), a one-line
        detail, and whether the agent waits for a person (it stopped after denied tool calls)."""
        outcome = self.outcome
        if outcome is not None:
            status = run_status(outcome.get("status"))
            if status == "needs_review":
                return "needs_review", None, False
            reason = outcome.get("reason")
            detail = outcome.get("error")
            if status == "needs_input":  # no progress: the blocker is the error
                return "no_progress", detail, True
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
        stderr = self.stderr_lines()
        for line in reversed(stderr):
            if line.startswith("cairn: error: "):
                return line.removeprefix("cairn: error: ")
        return stderr[-1] if stderr else None


class Attempt(Watched):
    """A child this supervisor starts: gated until ``go()``, then reaped by this process."""

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
        durable.ensure_dir(self.out_path.parent)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND
        out = durable.open_state(self.out_path, flags, "fleet output")
        try:
            err = durable.open_state(self.err_path, flags, "fleet output")
            try:
                self.proc = subprocess.Popen(
                    ["sh", "-c", GATE, "cairn-gate", sys.executable, "-m", "cairn", *argv],
                    cwd=cwd,
                    env={**child_env(), ENV_FLEET_ATTEMPT: ticket},  # not a resume by hand
                    stdin=subprocess.PIPE,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
            finally:
                os.close(err)
        finally:
            os.close(out)
        self.pid = self.proc.pid
        start = process_start(self.pid)
        if start is not None:
            self.started_at, self.started_since_boot = start.at.timestamp(), start.since_boot
        self.wake = wake  # set when the child exits
        threading.Thread(target=self._wait, daemon=True).start()

    def go(self) -> None:
        """Let the child start cairn (its pid is recorded now)."""
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):  # it died already: poll() tells
            self.proc.stdin.write(GO)
            self.proc.stdin.close()

    def cancel(self) -> None:
        """Let the child end without starting cairn (its pid could not be recorded)."""
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()

    def _wait(self) -> None:
        self.proc.wait()
        if self.wake is not None:
            self.wake.set()

    def poll(self) -> bool:
        code = self.proc.poll()
        if code is None:
            return False
        self.read_output()
        self.exit_code = code
        return True


class Adopted(Watched):
    """A child cairn a supervisor before this one started: watched through its pid and its
    output files, which hold its outcome once it has ended (alive or not when adopted)."""

    def __init__(
        self,
        ticket: str,
        layout: Layout,
        pid: int,
        started_at: float | None,
        started_since_boot: float | None,
    ) -> None:
        super().__init__(ticket, layout)
        self.pid, self.started_at, self.started_since_boot = pid, started_at, started_since_boot
        self.read_output()

    def alive(self) -> bool:
        return same_process(self.pid, self.started_at, self.started_since_boot)

    def ended_with_outcome(self) -> bool:
        """Whether the child is gone and said how it ended (it exited while no supervisor
        watched); a child killed with its supervisor says nothing."""
        return not self.alive() and self.written_code() is not None

    def poll(self) -> bool:
        if self.alive():
            return False
        self.read_output()
        self.exit_code = self.written_code()
        return True


def outcome_on_disk(layout: Layout, ticket: str) -> tuple[str, str | None]:
    """How a ticket's latest run stands by its files: ``none`` (no run yet), ``completed``,
    ``needs_review`` or ``interrupted``, and its last cutoff reason."""
    run_id = layout.latest_run(ticket)
    if run_id is None:
        return "none", None
    events, _ = journal.read(layout.run_dir(ticket, run_id))
    reason = _last_interruption(events)[0]
    last = events[-1] if events else {}
    if last.get("event") == "run_finished" and not layout.marker_path(ticket).exists():
        return str(last.get("status", "completed")), None
    return "interrupted", reason


def interruption_detail(layout: Layout, ticket: str) -> str | None:
    """The detail (the agent's error, the blocker) of the latest run's last cutoff, if any."""
    run_id = layout.latest_run(ticket)
    if run_id is None:
        return None
    events, _ = journal.read(layout.run_dir(ticket, run_id))
    return _last_interruption(events)[1]


def _last_interruption(events: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    """The reason and detail of the last cutoff since the last (re)start of the run."""
    reason = detail = None
    for event in events:
        if event.get("event") in ("cutoff", "run_interrupted"):
            reason, detail = event.get("reason"), event.get("detail")
        if event.get("event") == "run_started":
            reason = detail = None
    return reason, detail if isinstance(detail, str) else None

"""Processes: is a pid alive, when did it start, and stopping a whole process group."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
from datetime import UTC, datetime

# /proc/<pid>/stat states of a process that has exited: zombie (not reaped yet) and dead.
_EXITED_STATES = frozenset(b"ZX")


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a running process. A zombie (exited, not reaped yet) is not: it will
    never write again, and its parent may be a dead cairn that nobody reaps."""
    if pid <= 0:
        return False
    state = process_state(pid)
    if state is not None:
        return state not in _EXITED_STATES
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_state(pid: int) -> int | None:
    """The state letter of ``pid`` (``ord('R')``, ``ord('Z')``…) from /proc; None when unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    end = raw.rfind(b")")
    return raw[end + 2] if 0 <= end < len(raw) - 2 else None


@functools.cache
def boot_time() -> float | None:
    """When this machine booted (Linux: ``btime`` in /proc/stat)."""
    try:
        with open("/proc/stat") as handle:
            for line in handle:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return None


def process_start_time(pid: int) -> datetime | None:
    """When ``pid`` started (Linux: from /proc); None when unknown or the pid is gone."""
    boot = boot_time()
    if boot is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        ticks = int(fields[19])
    except (IndexError, ValueError):
        return None
    seconds = boot + ticks / os.sysconf("SC_CLK_TCK")
    return datetime.fromtimestamp(round(seconds, 2), tz=UTC)


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to a process group; False when the group is gone or not ours to signal."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def stop_group(pgid: int, grace: float, poll: float = 0.05) -> None:
    """SIGTERM to the group, then, once its leader has exited or ``grace`` seconds have passed,
    SIGKILL to whatever is left of the group.

    Blocks for at most ``grace`` seconds. For a non-blocking stop, call ``signal_group`` and
    schedule the SIGKILL yourself.
    """
    if not signal_group(pgid, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and pid_alive(pgid):
        time.sleep(poll)
    signal_group(pgid, signal.SIGKILL)


def kill_group(pgid: int) -> None:
    """SIGKILL the whole process group at once (gone already is fine)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def held_open(path: str) -> bool:
    """Whether a process has the file ``path`` (absolute) open, by /proc/<pid>/fd; True when
    that cannot be told (no /proc), so that nothing is taken for abandoned on a guess."""
    try:
        pids = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return True
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # gone, or not ours to look at
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == path:
                    return True
    return False

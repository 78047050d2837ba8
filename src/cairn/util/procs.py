"""Processes: is a pid alive, when did it start, and stopping a whole process group.

The facts about a process (its state, its start time, the machine's boot time, its open files)
come from psutil, the same calls on Linux and macOS. psutil costs a command tens of
milliseconds to import, so it is imported by the functions that judge a process, never with
this module: a command that judges none (a heartbeat, ``task done``) does not pay for it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
from datetime import UTC, datetime


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a running process. A zombie (exited, not reaped yet) is not: it will
    never write again, and its parent may be a dead cairn that nobody reaps."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)  # a pid that does not exist needs no further look
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    import psutil

    try:
        status = psutil.Process(pid).status()
    except psutil.NoSuchProcess:  # gone, or a zombie that psutil names as such
        return False
    except psutil.AccessDenied:  # alive, and not ours to look at
        return True
    return status not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)


@functools.cache
def boot_time() -> float | None:
    """When this machine booted, in seconds since the epoch; None when unknown."""
    import psutil

    try:
        return float(psutil.boot_time())
    except (OSError, RuntimeError):
        return None


def process_start_time(pid: int) -> datetime | None:
    """When ``pid`` started; None when unknown or the pid is gone. On Linux this is the boot
    time plus the start ticks of ``/proc/<pid>/stat``, the same instant the owner records of
    earlier versions hold, to the hundredth of a second."""
    import psutil

    try:
        seconds = psutil.Process(pid).create_time()
    except (psutil.Error, OSError, ValueError):
        return None
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
    """Whether a process has the file ``path`` (absolute) open; True when that cannot be told,
    so that nothing is taken for abandoned on a guess."""
    import psutil

    try:
        processes = list(psutil.process_iter())
    except (psutil.Error, OSError):
        return True
    for process in processes:
        try:
            files = process.open_files()
        except (psutil.Error, OSError):  # gone, or not ours to look at
            continue
        if any(opened.path == path for opened in files):
            return True
    return False

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

from cairn.util.tuples import NamedTuple


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
    """When this machine booted, in seconds since the epoch, as this process first read it;
    None when unknown. The kernel derives it from the clock, so a step of the clock (a machine
    restored from a snapshot setting its time) moves it: never compare it across processes
    to tell one boot from another (``boot_id`` does)."""
    import psutil

    try:
        return float(psutil.boot_time())
    except (OSError, RuntimeError):
        return None


# The kernel's name for this boot on Linux: a random UUID no step of the clock changes.
LINUX_BOOT_ID = "/proc/sys/kernel/random/boot_id"


@functools.cache
def boot_id() -> str | None:
    """This boot of the machine: the kernel's boot UUID where it has one (Linux), else the boot
    time in whole seconds since the epoch, as text; None when neither is known. Read once: a
    process lives in one boot (the dashboard judges every row's owner with it)."""
    try:
        with open(LINUX_BOOT_ID) as handle:
            return handle.read().strip() or None
    except OSError:
        booted = boot_time()
        return None if booted is None else str(round(booted))


@functools.lru_cache(maxsize=64)
def same_boot(recorded: str, current: str) -> bool:
    """Whether a recorded boot id names this boot. Two UUIDs are one boot when equal; two boot
    times when a second or two apart (the kernel derives them from the clock). A UUID and a
    time cannot be compared (a record of another system or release): the pid's start time,
    which no process of a later boot shares, tells instead."""
    numbers = []
    for text in (recorded, current):
        with contextlib.suppress(ValueError):
            numbers.append(float(text))
    if len(numbers) == 2:
        return abs(numbers[0] - numbers[1]) <= START_TOLERANCE
    return recorded == current if not numbers else True


# How far two readings of one process's start may lie apart (the clock's resolution, a boot
# time rounded to the second) and still name that process.
START_TOLERANCE = 2.0


class Start(NamedTuple):
    """When a process started, by two clocks. ``at`` is the machine's clock (what is shown, and
    on macOS fixed when the process starts); ``since_boot`` is the seconds from boot to the
    start, which on Linux no step of the clock moves (the kernel counts it in ticks), while
    ``at`` is that count plus a boot time the clock moves."""

    at: datetime
    since_boot: float | None


def process_start(pid: int) -> Start | None:
    """When ``pid`` started; None when unknown or the pid is gone. On Linux ``at`` is the boot
    time plus the start ticks of ``/proc/<pid>/stat``, the same instant the owner records of
    earlier versions hold, to the hundredth of a second."""
    import psutil

    try:
        seconds = psutil.Process(pid).create_time()
        booted: float | None = float(psutil.boot_time())
    except (psutil.Error, OSError, ValueError):
        return None
    except RuntimeError:
        booted = None
    since_boot = None if booted is None else round(seconds - booted, 2)
    return Start(datetime.fromtimestamp(round(seconds, 2), tz=UTC), since_boot)


def started_as(pid: int, at: datetime | float | None, since_boot: float | None) -> bool | None:
    """Whether the live ``pid`` is the process a record says started ``at`` (a time, or epoch
    seconds) and ``since_boot``: True when either clock agrees (a step of the clock between the
    record and now moves one of them, never both), False when neither does (the pid now belongs
    to another process), None when it cannot be told (nothing recorded, or the pid is gone)."""
    if at is None and since_boot is None:
        return None
    now = process_start(pid)
    if now is None:
        return None
    if (
        since_boot is not None
        and now.since_boot is not None
        and abs(now.since_boot - since_boot) <= START_TOLERANCE
    ):
        return True
    if at is not None:
        seconds = at if isinstance(at, float | int) else at.timestamp()
        if abs(now.at.timestamp() - seconds) <= START_TOLERANCE:
            return True
    return False


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

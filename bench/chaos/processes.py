"""The campaign's process tree: it becomes a child subreaper, so every process cairn starts and
leaves behind (an agent, a git) is re-parented to the campaign, which can find it, kill it and
decide when to reap it.

Reaping late on purpose is part of the experiment: in a container whose init does not reap
(this machine's does not), a dead agent stays a zombie until someone waits for it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Orphans of our descendants become our children instead of init's (Linux only)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int
    state: str  # R, S, D, Z, T, …


def read_proc(pid: int) -> Proc | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()
    return Proc(pid, int(fields[1]), int(fields[2]), fields[0].decode())


def state_of(pid: int) -> str | None:
    """The process's state letter, or None when it is gone."""
    found = read_proc(pid)
    return found.state if found else None


def all_procs() -> list[Proc]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            found = read_proc(int(entry))
            if found is not None:
                out.append(found)
    return out


def descendants(root: int | None = None) -> list[Proc]:
    """Every process below ``root`` (default: this process), zombies included."""
    root = os.getpid() if root is None else root
    children: dict[int, list[Proc]] = {}
    for proc in all_procs():
        children.setdefault(proc.ppid, []).append(proc)
    out: list[Proc] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child.pid)
    return out


def kill(pid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def kill_descendants(root: int | None = None) -> int:
    """SIGKILL every live process below ``root``; returns how many were signalled."""
    victims = [p for p in descendants(root) if p.state != "Z"]
    for proc in victims:
        kill(proc.pid)
    return len(victims)


def wait_descendants_gone(timeout: float, root: int | None = None) -> bool:
    """Wait until every process below ``root`` has exited (zombies count as exited)."""
    deadline = time.monotonic() + timeout
    while any(p.state != "Z" for p in descendants(root)):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def reap_orphans(keep: set[int] | frozenset[int] = frozenset()) -> int:
    """Wait for every zombie child of this process except ``keep`` (children a ``Popen`` still
    owns); returns how many were reaped. The campaigns are single-threaded, so a zombie child
    seen here is either in ``keep`` or an orphan re-parented to us."""
    reaped = 0
    me = os.getpid()
    for proc in all_procs():
        if proc.ppid == me and proc.state == "Z" and proc.pid not in keep:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(proc.pid, 0)
                reaped += 1
    return reaped


def quiesce(grace: float, keep: set[int] | frozenset[int] = frozenset()) -> int:
    """Let what is left below us finish for ``grace`` seconds, kill the rest, reap every orphan;
    returns how many had to be killed."""
    killed = 0
    if not wait_descendants_gone(grace):
        killed = kill_descendants()
        wait_descendants_gone(10)
    reap_orphans(keep)
    return killed

"""SIGKILL a real process at a random instant.

Two ways to pick the instant, mixed at random:

- **timed**: a delay drawn uniformly between 0 and a little more than the command usually
  takes, so kills land anywhere in its life (start-up, reading, writing, exiting);
- **on a write**: the directories where cairn keeps state (and its snapshot refs) are watched
  with inotify, and the process is killed right after the k-th change it makes there (a temp
  file created, a file written, a rename, a lock taken), plus a jitter of 0–2 ms. Most of a
  cairn command's life is Python start-up; this puts most kills inside its writes.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import select
import signal
import struct
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from processes import kill, kill_descendants

IN_MODIFY = 0x002
IN_CLOSE_WRITE = 0x008
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_ISDIR = 0x40000000
MASK = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE
EVENT = struct.Struct("iIII")


class Watch:
    """inotify on a set of directory trees; new subdirectories are watched as they appear."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.dirs: dict[int, Path] = {}
        for root in roots:
            self.add_root(root)

    def add_root(self, root: Path) -> None:
        """Watch ``root``'s tree; a root that does not exist yet is watched for from its
        nearest existing parent, and added with everything below it once it is created."""
        while not root.is_dir() and root != root.parent:
            root = root.parent
            if root.is_dir():
                self.add(root)
                return
        self.add_tree(root)

    def add(self, directory: Path) -> None:
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(directory), MASK)
        if wd >= 0:
            self.dirs[wd] = directory

    def add_tree(self, root: Path) -> None:
        if not root.is_dir():
            return
        self.add(root)
        for dirpath, dirnames, _ in os.walk(root):
            for name in dirnames:
                self.add(Path(dirpath) / name)

    def events(self, timeout: float) -> list[tuple[Path, str]]:
        """The changes seen within ``timeout`` seconds (possibly none)."""
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if not ready:
            return []
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return []
        out = []
        offset = 0
        while offset < len(data):
            wd, mask, _, length = EVENT.unpack_from(data, offset)
            name = data[offset + EVENT.size : offset + EVENT.size + length].rstrip(b"\0")
            offset += EVENT.size + length
            directory = self.dirs.get(wd)
            if directory is None:
                continue
            path = directory / os.fsdecode(name)
            if mask & IN_ISDIR and mask & IN_CREATE:
                self.add_tree(path)
            out.append((path, os.fsdecode(name)))
        return out

    def close(self) -> None:
        os.close(self.fd)


@contextlib.contextmanager
def watching(roots: Sequence[Path]) -> Iterator[Watch]:
    watch = Watch(roots)
    try:
        yield watch
    finally:
        watch.close()


@dataclass(frozen=True)
class Instant:
    """When to kill: ``after_events`` changes seen (0: timed) then ``delay`` seconds; ``tree``
    kills every process below the target too (an agent, a git), not only the target."""

    after_events: int
    delay: float
    tree: bool

    def describe(self) -> str:
        when = f"{self.after_events} writes + " if self.after_events else ""
        return f"{when}{self.delay * 1000:.1f} ms, {'tree' if self.tree else 'process'}"


def pick_instant(rng: random.Random, typical_s: float, typical_events: int) -> Instant:
    tree = rng.random() < 0.5
    if rng.random() < 0.35 or typical_events == 0:
        return Instant(0, rng.uniform(0, typical_s * 1.15), tree)
    jitter = 0.0 if rng.random() < 0.3 else rng.uniform(0, 0.002)
    return Instant(rng.randint(1, max(1, typical_events)), jitter, tree)


@dataclass
class Shot:
    """What happened: whether the kill landed (the target died of SIGKILL), its exit code
    otherwise, how many changes it had made before, and how long it ran."""

    killed: bool
    returncode: int
    events: int
    seconds: float
    stdout: str = ""
    stderr: str = ""


def spawn(
    argv: Sequence[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        list(argv),
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def shoot(
    argv: Sequence[str],
    cwd: Path,
    instant: Instant,
    watch_roots: Sequence[Path],
    env: dict[str, str] | None = None,
    timeout: float = 120.0,
) -> Shot:
    """Start ``argv`` and SIGKILL it at ``instant``; the target is reaped before returning (its
    orphans are not: see ``processes.quiesce``)."""
    with watching(watch_roots) as watch:
        started = time.monotonic()
        proc = spawn(argv, cwd, env)
        events = 0
        deadline = started + timeout
        if instant.after_events:
            while events < instant.after_events and proc.poll() is None:
                if time.monotonic() > deadline:
                    break
                events += len(watch.events(0.05))
        end = time.monotonic() + instant.delay
        while proc.poll() is None and (left := end - time.monotonic()) > 0:
            events += len(watch.events(min(left, 0.002)))
        if proc.poll() is None:
            if instant.tree:
                kill_descendants(proc.pid)
            kill(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        events += sum(1 for _ in watch.events(0))
    code = proc.returncode
    return Shot(
        code == -signal.SIGKILL,
        code,
        events,
        time.monotonic() - started,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
    )


def observe(
    argv: Sequence[str], cwd: Path, watch_roots: Sequence[Path], timeout: float = 300.0
) -> Shot:
    """Run ``argv`` to the end (no kill), counting the changes it makes where state lives."""
    with watching(watch_roots) as watch:
        started = time.monotonic()
        proc = spawn(argv, cwd)
        events = 0
        while proc.poll() is None and time.monotonic() < started + timeout:
            events += len(watch.events(0.05))
        if proc.poll() is None:
            kill_descendants(proc.pid)
            kill(proc.pid)
        out, err = proc.communicate()
        events += len(watch.events(0))
    return Shot(
        False,
        proc.returncode,
        events,
        time.monotonic() - started,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
    )

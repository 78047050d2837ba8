"""A worker's clone of the shared remote and the locks that let its rebuilds share it. The
ticket's refs there and the fenced push are ``cairn.remote.refs``'."""

from __future__ import annotations

import fcntl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cairn.git import Git, base_runner
from cairn.remote.refs import REMOTE


@contextmanager
def locked(path: Path, exclusive: bool = True) -> Iterator[None]:
    """An flock on ``path``: exclusive, or shared with other shared holders. A worker's clone
    is held shared by each rebuild (several at once) and exclusively by its creation and its
    garbage collection, which never run beside a rebuild."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def locked_if_free(path: Path) -> Iterator[bool]:
    """An exclusive flock on ``path`` when nobody holds one of any kind: True, else False at
    once (the caller skips its work)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_TICKETS: dict[str, tuple[threading.Lock, int]] = {}
_TICKETS_GUARD = threading.Lock()


@contextmanager
def ticket_locked(key: str) -> Iterator[None]:
    """One holder at a time per ticket of a worker root (an attempt's rebuild or cleanup and a
    newer attempt's on the same worker). In-process: one worker owns a root (its flock)."""
    with _TICKETS_GUARD:
        lock, users = _TICKETS.get(key, (threading.Lock(), 0))
        _TICKETS[key] = (lock, users + 1)
    try:
        with lock:
            yield
    finally:
        with _TICKETS_GUARD:
            lock, users = _TICKETS[key]
            if users == 1:
                del _TICKETS[key]
            else:
                _TICKETS[key] = (lock, users - 1)


def ensure_clone(url: str, clone: Path) -> Git:
    """The worker's clone of ``url`` at ``clone`` (made on first use), as a git runner."""
    if not (clone / ".git").is_dir():
        clone.parent.mkdir(parents=True, exist_ok=True)
        base_runner(clone.parent).run(["clone", "-q", "--origin", REMOTE, "--", url, str(clone)])
    return base_runner(clone)

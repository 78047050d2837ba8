"""The core of cairn's state-file I/O, which ``cairn.util.durable`` builds on: replacing a file
so that a reader only ever sees a whole one (the new content goes to a temp file beside it,
fsynced, is renamed over it, and the directory is fsynced), and opening one without following
a symlink or blocking on anything but a regular file. Every state file cairn writes is written
this way. Standard library only (``os``, ``stat``), paths as text: the heartbeat hook reads and
writes the marker through it without loading ``pathlib``."""

from __future__ import annotations

import contextlib
import os
import stat

TEMP_PREFIX = ".tmp."


class NotRegular(OSError):
    """The path names something other than a regular file (a FIFO, a device, a socket)."""


def open_regular(path: str, flags: int, mode: int = 0o644) -> int:
    """Open a regular file without following a symlink (``ELOOP``) and without blocking on a
    FIFO; a directory raises ``EISDIR``, anything else not regular ``NotRegular``."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotRegular(path)
    os.set_blocking(fd, True)
    return fd


def stage(path: str, data: bytes | str, *, fsync: bool = True) -> str:
    """Write ``data`` to a new temp file in ``path``'s directory and return its path; nothing
    is replaced yet."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    head, name = os.path.split(path)
    temp = os.path.join(head, f"{TEMP_PREFIX}{name}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        discard(temp)
        raise
    return temp


def discard(temp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(temp)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write(path: str, data: bytes | str, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that readers only ever see a complete file."""
    temp = stage(path, data, fsync=fsync)
    try:
        os.replace(temp, path)
    except BaseException:
        discard(temp)
        raise
    if fsync:
        fsync_dir(os.path.dirname(path) or ".")

"""Replacing a file so that a reader only ever sees a whole one: the new content goes to a temp
file beside it (fsynced), is renamed over it, and the directory is fsynced. Every state file
cairn writes is written this way; ``cairn.util.durable`` builds its state-file helpers on it.
Standard library only (``os``), paths as text: the heartbeat hook writes the marker through it
without loading ``pathlib``."""

from __future__ import annotations

import contextlib
import os

TEMP_PREFIX = ".tmp."


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

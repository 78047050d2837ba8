"""The only code that writes state files: atomic replace, fsynced appends, capped reads.

``atomic_write`` writes a temp file in the target's directory, fsyncs it, renames it over the
target and fsyncs the directory, so a kill or a power cut at any instant leaves the old or the new
version, never a mix. ``append_line`` adds one newline-terminated record with one ``write`` and an
fsync; a record torn by a crash is left for readers to skip, and the next append starts on a fresh
line so it is never glued to the torn one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from cairn.errors import BadInput
from cairn.util.procs import pid_alive

TEMP_PREFIX = ".tmp."
DEFAULT_READ_LIMIT = 4 * 1024 * 1024


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path: Path) -> None:
    """Create ``path`` and missing parents, fsyncing each parent that gained an entry."""
    if path.is_dir():
        return
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir()
        fsync_dir(directory.parent)


def atomic_write(path: Path, data: bytes | str, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that readers only ever see a complete file."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    directory = path.parent
    temp = directory / f"{TEMP_PREFIX}{path.name}.{os.getpid()}.{os.urandom(4).hex()}"
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
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    if fsync:
        fsync_dir(directory)


def append_line(path: Path, line: str, *, fsync: bool = True) -> None:
    """Append one record (``line`` must not contain a newline) as a single write."""
    if "\n" in line:
        raise ValueError("a journal record must be one line")
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        size = os.fstat(fd).st_size
        torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        os.write(fd, (("\n" if torn else "") + line + "\n").encode("utf-8"))
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def remove(path: Path, *, fsync: bool = True) -> bool:
    """Delete ``path`` durably; False when it was already gone."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    if fsync:
        fsync_dir(path.parent)
    return True


def read_state_file(path: Path, what: str, limit: int = DEFAULT_READ_LIMIT) -> bytes | None:
    """The bytes of a state file, None when absent; a symlink or an oversized file is bad input."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BadInput(
                f"{what} {path} is a symlink; cairn never follows links in its state, remove it"
            ) from None
        raise BadInput(f"{what} {path} cannot be read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise BadInput(f"{what} {path} is not a regular file; remove it")
        if info.st_size > limit:
            raise BadInput(
                f"{what} {path} is {info.st_size} bytes, over the {limit} byte limit; "
                "it is not a cairn file, move it away"
            )
        chunks = []
        remaining = limit + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise BadInput(f"{what} {path} grew over the {limit} byte limit; move it away")
        return data
    finally:
        os.close(fd)


def decode_text(data: bytes, path: Path, what: str) -> str:
    if b"\0" in data:
        raise BadInput(f"{what} {path} is binary, not text; remove it or restore it from a backup")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"{what} {path} is not UTF-8 text (byte {exc.start}); fix or remove it"
        ) from None


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive OS lock on ``path`` (created if needed) for a short read-modify-write."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def remove_stale_temps(directory: Path) -> None:
    """Delete temp files that a killed writer left behind in ``directory``."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.name.startswith(TEMP_PREFIX):
            parts = entry.name.rsplit(".", 2)
            with contextlib.suppress(ValueError, OSError):
                if not pid_alive(int(parts[-2])):
                    os.unlink(entry.path)

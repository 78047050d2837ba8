"""The only code that writes state files: atomic replace, fsynced appends, capped reads.

``atomic_write`` writes a temp file in the target's directory, fsyncs it, renames it over the
target and fsyncs the directory, so a kill or a power cut at any instant leaves the old or the new
version, never a mix. ``append_line`` adds one newline-terminated record with one ``write`` and an
fsync; a record torn by a crash is cut off by the next append (under the lock), so a torn line
never outlives the next write. Every state file is opened without following a symlink: a link,
a directory or a device where a state file belongs is bad input, reported before anything is
written.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import threading
from pathlib import Path

from cairn.errors import BadInput
from cairn.util import atomic
from cairn.util.tuples import NamedTuple

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

TEMP_PREFIX = atomic.TEMP_PREFIX
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})  # a write failed for want of space
DEFAULT_READ_LIMIT = 4 * 1024 * 1024


_TAIL_CHUNK = 64 * 1024
# The locks this process holds, per thread: ``locked`` is re-entrant within one thread, and
# still excludes the process's other threads (each has its own open file, so flock applies).
_held = threading.local()


def open_state(path: Path, flags: int, what: str, mode: int = 0o644) -> int:
    """Open a state file without following a symlink; a link or a non-regular file is bad input
    naming it. Other OS errors (no space, read-only) are raised as they are."""
    try:
        return atomic.open_regular(os.fspath(path), flags, mode)
    except atomic.NotRegular:
        raise BadInput(f"{what} {path} is not a regular file; remove it") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BadInput(
                f"{what} {path} is a symlink; cairn never follows links in its state, remove it"
            ) from None
        if exc.errno == errno.EISDIR:
            raise BadInput(f"{what} {path} is a directory, not a file; remove it") from None
        raise


def check_state_dir(path: Path, what: str) -> None:
    """``path`` is a real directory or absent; a symlink or a file there is bad input."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise BadInput(f"{what} {path} is below a file, not a directory; move it away") from None
    if stat.S_ISLNK(info.st_mode):
        raise BadInput(
            f"{what} {path} is a symlink; cairn never follows links in its state, remove it"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise BadInput(f"{what} {path} is not a directory; move it away")


def inside(root: Path, bounds: list[Path], what: str) -> Path:
    """``root``, once its real path is known to be inside one of ``bounds``."""
    real = Path(os.path.realpath(root))
    for bound in bounds:
        if real.is_relative_to(os.path.realpath(bound)):
            return root
    raise BadInput(
        f"{what} {root} resolves to {real}, outside the repository; cairn keeps its state "
        "inside it: remove the symlink or fix state_dir (an absolute state_dir may point "
        "anywhere)"
    )


def fsync_dir(path: Path) -> None:
    atomic.fsync_dir(os.fspath(path))


def ensure_dir(path: Path) -> None:
    """Create ``path`` and missing parents, fsyncing each parent that gained an entry.
    ``path`` itself must not be a symlink."""
    check_state_dir(path, "state directory")
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


class Staged(NamedTuple):
    """A new version of ``target``, complete and fsynced in ``temp`` beside it, not yet in
    place: ``put_in_place`` renames it over the target, ``discard`` drops it."""

    temp: Path
    target: Path


def stage(path: Path, data: bytes | str, *, fsync: bool = True) -> Staged:
    """Write ``data`` to a temp file in ``path``'s directory; nothing is replaced yet."""
    return Staged(Path(atomic.stage(os.fspath(path), data, fsync=fsync)), path)


def put_in_place(staged: Sequence[Staged], *, fsync: bool = True) -> None:
    """Rename each staged file over its target, then fsync the directories."""
    try:
        for item in staged:
            os.replace(item.temp, item.target)
    except BaseException:
        discard(staged)
        raise
    if fsync:
        for directory in dict.fromkeys(item.target.parent for item in staged):
            fsync_dir(directory)


def discard(staged: Sequence[Staged]) -> None:
    for item in staged:
        atomic.discard(os.fspath(item.temp))


def atomic_write(path: Path, data: bytes | str, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that readers only ever see a complete file
    (``cairn.util.atomic``)."""
    atomic.write(os.fspath(path), data, fsync=fsync)


def check_free_space(path: Path, need: int) -> None:
    """Raise ENOSPC when the file system holding ``path`` (or its nearest existing parent) has
    less than ``need`` bytes free: checked before a run starts writing, so that a full disk
    stops it with nothing written."""
    free, probe = free_space(path)
    if free < need:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(probe))


def free_space(path: Path) -> tuple[int, Path]:
    """The bytes an unprivileged writer may still use on the file system holding ``path``, and
    the path asked (``path``, or its nearest existing parent)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    info = os.statvfs(probe)
    return info.f_bavail * info.f_frsize, probe


def check_writable(path: Path, *, replace: bool = True) -> None:
    """Raise PermissionError when ``path`` cannot be written: it exists and is read-only
    (a read-only file system, an immutable or read-only file), or its directory cannot take
    a new entry (needed to create ``path``, or a temp file to ``replace`` it with). Checked
    before a write that must not stop halfway."""
    if os.path.islink(path):
        raise BadInput(
            f"state file {path} is a symlink; cairn never follows links in its state, remove it"
        )
    exists = os.path.lexists(path)
    probes = ([path] if exists else []) + ([path.parent] if replace or not exists else [])
    for probe in probes:
        if not os.access(probe, os.W_OK):
            raise PermissionError(errno.EACCES, "cairn's state is read-only here", str(probe))


def append_line(path: Path, line: str, *, fsync: bool = True, what: str = "journal") -> None:
    """Append one record (``line`` must not contain a newline) as a single write.

    A last line without its newline is a record torn by a killed writer: it is cut off first.
    The caller holds the lock that every writer of ``path`` takes, so no live writer is ever
    mid-line here."""
    if "\n" in line:
        raise ValueError("a journal record must be one line")
    fd = open_state(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, what)
    try:
        size = os.fstat(fd).st_size
        if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
            os.ftruncate(fd, _last_line_end(fd, size))
        os.write(fd, (line + "\n").encode("utf-8"))
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def torn_tail(path: Path, what: str = "journal") -> int:
    """How many bytes after the last newline of ``path`` (a torn last record); 0 when none."""
    try:
        fd = open_state(path, os.O_RDONLY, what)
    except FileNotFoundError:
        return 0
    try:
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return 0
        return size - _last_line_end(fd, size)
    finally:
        os.close(fd)


def _last_line_end(fd: int, size: int) -> int:
    """The offset just after the last newline before ``size`` (0 when there is none)."""
    end = size
    while end > 0:
        start = max(0, end - _TAIL_CHUNK)
        found = os.pread(fd, end - start, start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def read_tail(path: Path, what: str, size: int = _TAIL_CHUNK) -> bytes | None:
    """The last ``size`` bytes of a state file (None when absent), opened as state files are."""
    try:
        fd = open_state(path, os.O_RDONLY, what)
    except FileNotFoundError:
        return None
    try:
        total = os.fstat(fd).st_size
        start = max(0, total - size)
        return os.pread(fd, total - start, start)
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
        fd = open_state(path, os.O_RDONLY, what)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadInput(f"{what} {path} cannot be read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
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
def locked(path: Path) -> Iterator[int]:
    """Hold an exclusive OS lock on ``path`` (created if needed) for a short read-modify-write;
    yields the lock's file descriptor (a child process given it holds the lock as long as it
    lives, even past this process).

    Re-entrant within a thread: a function that takes the lock may call one that takes it too.
    """
    held: dict[str, int] = _held.__dict__.setdefault("paths", {})
    key = os.path.abspath(path)
    if key in held:
        yield held[key]
        return
    fd = open_state(path, os.O_RDWR | os.O_CREAT, "lock file")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        held[key] = fd
        try:
            yield fd
        finally:
            del held[key]
    finally:
        os.close(fd)


def remove_stale_temps(directory: Path) -> int:
    """Delete temp files that a killed writer on this host left behind in ``directory``;
    returns how many. Call it holding the lock the writers of ``directory`` take."""
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return 0
    from cairn.util.procs import pid_alive

    removed = 0
    for entry in entries:
        if entry.name.startswith(TEMP_PREFIX):
            parts = entry.name.rsplit(".", 2)
            with contextlib.suppress(ValueError, IndexError, OSError):
                if not pid_alive(int(parts[-2])):
                    os.unlink(entry.path)
                    removed += 1
    return removed

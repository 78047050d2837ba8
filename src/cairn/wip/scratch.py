"""Private scratch directories for temporary index files, under the state root.

Each is named ``<purpose>.<host>.<pid>.<random>``, so a directory left behind by a killed cairn
is recognised and removed by the next one on the same host.

Nothing here is followed through a symlink: a state root that resolves outside the repository
is refused, a ``tmp`` that is a symlink is replaced by a real directory (it holds nothing of
value; the link alone goes, never what it points to, and a warning says so), and a link found
inside ``tmp`` is removed as a link.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from cairn.util import durable
from cairn.util.digests import sha256
from cairn.util.procs import pid_alive

STALE_AFTER_SECONDS = 24 * 3600


def _host() -> str:
    return sha256(os.uname().nodename.encode()).hexdigest()[:8]  # gethostname()


@contextlib.contextmanager
def scratch_dir(
    state_root: Path, purpose: str, warnings: list[str] | None = None
) -> Iterator[Path]:
    """A new private directory under ``<state_root>/tmp``, removed after; what was replaced
    on the way is said in ``warnings``."""
    durable.inside(state_root, [state_root.parent], "the state root")
    durable.check_state_dir(state_root, "the state root")
    base = state_root / "tmp"
    _make_base(base, warnings)
    remove_abandoned(base)
    path = base / f"{purpose}.{_host()}.{os.getpid()}.{os.urandom(4).hex()}"
    path.mkdir()
    durable.inside(path, [state_root], "the scratch directory")  # swapped meanwhile: refused
    try:
        yield path
    finally:
        _remove(path)


def _make_base(base: Path, warnings: list[str] | None) -> None:
    """``base`` as a real directory: made when missing, a symlink replaced (said in
    ``warnings``), anything else not a directory refused (``check_state_dir``)."""
    try:
        info = os.lstat(base)
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISLNK(info.st_mode):
        target = os.readlink(base)
        os.unlink(base)  # the link only; its target is never touched
        if warnings is not None:
            warnings.append(
                f"{base} was a symlink (to {target}); replaced it with a directory, as cairn "
                "never writes through a link in its state"
            )
    durable.check_state_dir(base, "scratch directory")
    base.mkdir(parents=True, exist_ok=True)
    durable.check_state_dir(base, "scratch directory")  # a link made meanwhile is refused


def _remove(path: Path) -> None:
    """Remove a scratch directory; most hold a file or two, which need no shutil. A symlink
    is removed as a link."""
    try:
        if os.path.islink(path):
            os.unlink(path)
            return
        for entry in os.scandir(path):
            if entry.is_dir(follow_symlinks=False):
                raise IsADirectoryError(entry.path)
            os.unlink(entry.path)
        os.rmdir(path)
    except OSError:
        import shutil

        shutil.rmtree(path, ignore_errors=True)


def remove_abandoned(base: Path) -> None:
    """Remove scratch directories whose owner died (same host), or older than a day (any);
    a symlink among them goes at once, as a link."""
    host, now = _host(), time.time()
    for entry in base.iterdir():
        parts = entry.name.split(".")
        try:
            info = entry.lstat()
            age = now - info.st_mtime
            dead = len(parts) == 4 and parts[1] == host and not pid_alive(int(parts[2]))
        except (OSError, ValueError):
            continue
        if stat.S_ISLNK(info.st_mode) or dead or age > STALE_AFTER_SECONDS:
            _remove(entry)

"""Private scratch directories for temporary index files, under the state root.

Each is named ``<purpose>.<host>.<pid>.<random>``, so a directory left behind by a killed cairn
is recognised and removed by the next one on the same host.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from cairn.util.digests import sha256
from cairn.util.procs import pid_alive

STALE_AFTER_SECONDS = 24 * 3600


def _host() -> str:
    return sha256(os.uname().nodename.encode()).hexdigest()[:8]  # gethostname()


@contextlib.contextmanager
def scratch_dir(state_root: Path, purpose: str) -> Iterator[Path]:
    base = state_root / "tmp"
    base.mkdir(parents=True, exist_ok=True)
    remove_abandoned(base)
    path = base / f"{purpose}.{_host()}.{os.getpid()}.{os.urandom(4).hex()}"
    path.mkdir()
    try:
        yield path
    finally:
        _remove(path)


def _remove(path: Path) -> None:
    """Remove a scratch directory; most hold a file or two, which need no shutil."""
    try:
        for entry in os.scandir(path):
            if entry.is_dir(follow_symlinks=False):
                raise IsADirectoryError(entry.path)
            os.unlink(entry.path)
        os.rmdir(path)
    except OSError:
        import shutil

        shutil.rmtree(path, ignore_errors=True)


def remove_abandoned(base: Path) -> None:
    """Remove scratch directories whose owner died (same host), or older than a day (any)."""
    host, now = _host(), time.time()
    for entry in base.iterdir():
        parts = entry.name.split(".")
        try:
            age = now - entry.stat().st_mtime
            dead = len(parts) == 4 and parts[1] == host and not pid_alive(int(parts[2]))
        except (OSError, ValueError):
            continue
        if dead or age > STALE_AFTER_SECONDS:
            _remove(entry)

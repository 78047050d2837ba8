"""Private scratch directories for temporary index files, under the state root.

Named after the owning pid, so a directory left by a killed cairn is removed by the next one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

STALE_AFTER_SECONDS = 24 * 3600


@contextlib.contextmanager
def scratch_dir(state_root: Path, purpose: str) -> Iterator[Path]:
    base = state_root / "tmp"
    base.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(base)
    path = base / f"{purpose}-{os.getpid()}-{secrets.token_hex(4)}"
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _remove_abandoned(base: Path) -> None:
    now = time.time()
    for entry in base.iterdir():
        try:
            pid = int(entry.name.split("-")[1])
            age = now - entry.stat().st_mtime
        except (IndexError, ValueError, OSError):
            continue
        if age > STALE_AFTER_SECONDS or (age > 5 and not _alive(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

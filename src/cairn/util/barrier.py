"""A checkpoint barrier: on a worker of the fleet on Temporal (docs/scale-out.md) a run's state
reaches the shared remote only at the worker's checkpoints, so a task completed just before the
machine dies would be lost with it and done again. ``$CAIRN_CHECKPOINT_DIR`` names a directory
the worker watches: ``cairn task done`` leaves a request there and returns once the worker has
removed it, which it does after a checkpoint begun after the request was pushed.

Outside a worker the variable is unset and nothing waits."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from cairn.terms import ENV_CHECKPOINT_DIR

WAIT = 120.0  # seconds a request waits for the worker before it goes on without the push
POLL = 0.05
SUFFIX = ".want"


def wait_for_checkpoint(environ: Mapping[str, str] | None = None, timeout: float = WAIT) -> bool:
    """Ask the worker for a checkpoint and wait until it is pushed: True once it is (or when no
    worker runs this), False when the worker did not answer in ``timeout`` seconds."""
    where = (os.environ if environ is None else environ).get(ENV_CHECKPOINT_DIR)
    if not where:
        return True
    path = Path(where) / f"{os.getpid()}-{time.time_ns()}{SUFFIX}"
    from cairn.util import durable  # loaded already by the commands that call this

    try:
        durable.atomic_write(path, b"", fsync=False)
    except OSError:
        return False
    deadline = time.monotonic() + timeout
    while path.exists():
        if time.monotonic() > deadline:
            path.unlink(missing_ok=True)
            return False
        time.sleep(POLL)
    return True


def pending(directory: Path) -> list[Path]:
    """The requests waiting in ``directory``."""
    try:
        return sorted(p for p in directory.iterdir() if p.name.endswith(SUFFIX))
    except OSError:
        return []


def release(requests: list[Path]) -> None:
    """Answer ``requests``: a checkpoint begun after they were made is pushed."""
    for path in requests:
        path.unlink(missing_ok=True)


def reset(directory: Path) -> None:
    """An empty ``directory`` (requests of an earlier attempt are dead with their asker)."""
    import shutil  # only on a worker: `cairn task done` imports this module on its hot path

    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)

"""A checkpoint barrier: on a worker of the fleet on Temporal (docs/scale-out.md) a run's state
reaches the shared remote only at the worker's checkpoints, so a task completed just before the
machine dies would be lost with it and done again. ``$CAIRN_CHECKPOINT_DIR`` names a directory
the worker watches: ``cairn task done`` leaves a request there and returns once the worker has
removed it, which it does after a checkpoint begun after the request was pushed.

It fails closed: a request the worker has not answered in ``$CAIRN_CHECKPOINT_WAIT`` seconds
(the worker sets it to ``HEARTBEATS`` heartbeat timeouts) is taken back, and the report says it
was not confirmed (``Unconfirmed``, exit 3) and stops its run (``cairn.run.progress``).

Outside a worker the variable is unset and nothing waits."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from cairn.errors import CairnError, ExitCode
from cairn.terms import ENV_CHECKPOINT_DIR, ENV_CHECKPOINT_WAIT

WAIT = 120.0  # seconds a request waits for the worker when it names no wait
HEARTBEATS = 4  # the wait a worker names: this many heartbeat timeouts (120 s at 30 s)
POLL = 0.05
SUFFIX = ".want"


class Unconfirmed(CairnError):
    """A report the worker did not push to the shared remote in time: the run stops."""

    exit_code = ExitCode.INTERRUPTED


def wait_after(heartbeat_timeout: float) -> float:
    """The wait a worker gives its runs' requests: a worker that has not pushed in that long
    has missed its heartbeats several times over, and its attempt is retried elsewhere."""
    return HEARTBEATS * heartbeat_timeout


def waiting_time(environ: Mapping[str, str] | None = None) -> float:
    """The seconds a request waits: ``$CAIRN_CHECKPOINT_WAIT``, else ``WAIT``."""
    value = (os.environ if environ is None else environ).get(ENV_CHECKPOINT_WAIT, "")
    try:
        seconds = float(value)
    except ValueError:
        return WAIT
    return seconds if seconds > 0 else WAIT


def wait_for_checkpoint(
    environ: Mapping[str, str] | None = None, timeout: float | None = None
) -> bool:
    """Ask the worker for a checkpoint and wait until it is pushed: True once it is (or when no
    worker runs this), False when the worker did not answer in ``timeout`` seconds (default
    ``waiting_time``)."""
    env = os.environ if environ is None else environ
    where = env.get(ENV_CHECKPOINT_DIR)
    if not where:
        return True
    if timeout is None:
        timeout = waiting_time(env)
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

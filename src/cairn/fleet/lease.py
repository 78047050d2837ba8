"""One supervisor per repository: an ``flock`` on ``<state root>/fleet/lease`` held for the
supervisor's life, with its owner record (``state.owner``) written into the file so a second
``cairn fleet start`` can name it. The kernel drops the lock when the supervisor dies, however it
dies; the file is never replaced or deleted (a new inode would be a second lock)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path

import msgspec

from cairn.errors import LeaseBusy
from cairn.state import owner
from cairn.state.layout import Layout
from cairn.state.owner import Owner
from cairn.util import clock, durable

LEASE = "lease"
STOP = "stop"


class SupervisorLease:
    def __init__(self, path: Path, fd: int, me: Owner) -> None:
        self.path, self.fd, self.me = path, fd, me

    def release(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)
            os.close(self.fd)
            self.fd = -1


def lease_path(layout: Layout) -> Path:
    return layout.fleet_dir / LEASE


def stop_path(layout: Layout) -> Path:
    return layout.fleet_dir / STOP


def acquire(layout: Layout) -> SupervisorLease:
    """Take the repository's supervisor lease, or raise LeaseBusy naming the supervisor that
    holds it."""
    directory = layout.fleet_dir
    durable.ensure_dir(directory)
    path = directory / LEASE
    fd = durable.open_state(path, os.O_RDWR | os.O_CREAT, "fleet lease")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        who = holder.describe() if holder is not None else "another cairn process"
        raise LeaseBusy(
            f"a fleet supervisor already runs for this repository ({who}); stop it with "
            "`cairn fleet stop` or wait for it to finish"
        ) from None
    me = owner.me()
    os.ftruncate(fd, 0)
    os.pwrite(fd, msgspec.json.encode(me), 0)
    return SupervisorLease(path, fd, me)


def holder(layout: Layout) -> Owner | None:
    """The live supervisor of this repository, if any (its lock is held)."""
    path = lease_path(layout)
    if not path.is_file():
        return None
    fd = durable.open_state(path, os.O_RDONLY, "fleet lease")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(fd) or Owner(host=owner.this_host(), pid=0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _holder(fd: int) -> Owner | None:
    with contextlib.suppress(OSError, ValueError):
        return msgspec.convert(json.loads(os.pread(fd, 4096, 0)), Owner, strict=False)
    return None


def request_stop(layout: Layout) -> None:
    """Ask the running supervisor to stop (it checks for this file every tick)."""
    durable.atomic_write(stop_path(layout), json.dumps({"at": clock.now().isoformat()}) + "\n")


def take_stop_request(layout: Layout) -> bool:
    """Whether a stop was asked for; the request is consumed."""
    return durable.remove(stop_path(layout))

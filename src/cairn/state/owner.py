"""Who owns a run, and whether that owner is still alive.

An owner is ``{host, pid, pid_started_at, pid_started_since_boot, boot_id}``. On the owner's
host, liveness is certain: the pid must exist, must still be the same process (same start time,
by the clock or counted from boot: a step of the clock moves only the first) and the machine must
not have rebooted (same boot id: the kernel's boot UUID on Linux). From another host nothing can
be checked, so such an owner only becomes stale after ``marker.stale_after`` without an update.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from msgspec import Struct
from msgspec.structs import force_setattr

from cairn.terms import Liveness as Liveness  # re-exported: marker and catch-up name it here
from cairn.util import procs

# The system's first process never is a cairn run, unless a recorded start time proves it is
# (cairn as a container's init).
INIT_PID = 1


def with_offset(value: datetime) -> datetime:
    """A time without an offset is taken as UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def with_offsets(record: Struct, *names: str) -> None:
    """Each named time of ``record`` without an offset taken as UTC (in ``__post_init__``)."""
    for name in names:
        value = getattr(record, name)
        if value is not None and value.tzinfo is None:
            force_setattr(record, name, value.replace(tzinfo=UTC))


class Owner(Struct, frozen=True, kw_only=True):
    host: str
    pid: int
    pid_started_at: datetime | None = None
    pid_started_since_boot: float | None = None
    boot_id: str | None = None

    def __post_init__(self) -> None:
        with_offsets(self, "pid_started_at")

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


def this_host() -> str:
    import socket  # only when an owner is recorded or checked: most commands never ask

    return socket.gethostname()


def me() -> Owner:
    return of(os.getpid())


def of(pid: int) -> Owner:
    """The process ``pid`` of this host as an owner: its start by both clocks, this boot."""
    start = procs.process_start(pid)
    return Owner(
        host=this_host(),
        pid=pid,
        pid_started_at=start.at if start else None,
        pid_started_since_boot=start.since_boot if start else None,
        boot_id=procs.boot_id(),
    )


def check(
    owner: Owner | None, last_updated: datetime, stale_after: float, now: datetime
) -> tuple[Liveness, str]:
    """The owner's liveness and a short reason for it."""
    if owner is None:
        return "unknown", "no owner is recorded"
    if owner.host != this_host():
        return _remote(owner, (now - last_updated).total_seconds(), stale_after)
    current_boot = procs.boot_id()
    if owner.boot_id and current_boot and not procs.same_boot(owner.boot_id, current_boot):
        return "dead", f"{owner.describe()} ran before this machine restarted"
    if owner.pid == INIT_PID and owner.pid_started_at is None:
        return "dead", f"{owner.describe()} is the system's first process, not a cairn run"
    if not procs.pid_alive(owner.pid):
        return "dead", f"{owner.describe()} is gone"
    if procs.started_as(owner.pid, owner.pid_started_at, owner.pid_started_since_boot) is False:
        return "dead", f"{owner.describe()} is gone (the pid now belongs to another process)"
    return "alive", f"{owner.describe()} is running"


def _remote(owner: Owner, age: float, stale_after: float) -> tuple[Liveness, str]:
    """An owner on another host: judged by the age of its last update. A time in the future
    (that host's clock is ahead) counts as now, so skew never makes an age negative."""
    ahead = f" (its clock is {_age(-age)} ahead of this host's)" if age < 0 else ""
    age = max(age, 0.0)
    if age > stale_after:
        return "remote_stale", f"{owner.describe()} has not updated it for {_age(age)}"
    return "remote", f"{owner.describe()} updated it {_age(age)} ago{ahead}"


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def format_age(seconds: float) -> str:
    return _age(seconds)

"""At most one live run per ticket: an OS lock on ``tickets/<ticket>/lease`` plus the owner record.

The lock is an ``flock`` held for the whole run; the kernel drops it when the owner dies, however
it dies. The owner record (in the marker, and mirrored into the lease file for the instant before
the marker exists) names the owner in errors and lets another host, or a later reader, judge
liveness. The lease file is never replaced or deleted: a new inode would be a second lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from datetime import datetime
from pathlib import Path

import msgspec

from cairn.errors import BadInput, LeaseBusy
from cairn.state import marker, owner
from cairn.state.layout import LEASE, Layout
from cairn.state.owner import Owner
from cairn.util import clock, durable

# How long a loser of the race waits for the winner's owner record (written right after its
# flock) before it names the holder "another cairn process".
RECORD_WAIT = 0.2


class Lease:
    """A held lease. ``previous`` is the marker found when it was taken, if any."""

    # a plain class, not a dataclass: importing dataclasses costs every hook call ~10 ms
    def __init__(
        self,
        ticket: str,
        path: Path,
        fd: int | None,
        previous: marker.Marker | None = None,
        takeover: str | None = None,
        warning: str | None = None,
        me: Owner | None = None,
    ) -> None:
        self.ticket = ticket
        self.path = path
        self.fd = fd
        self.previous = previous
        self.takeover = takeover
        self.warning = warning
        self.me = me if me is not None else owner.me()

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def acquire(
    layout: Layout,
    ticket: str,
    *,
    stale_after: float,
    takeover: bool = False,
    now: datetime | None = None,
) -> Lease:
    """Take the ticket's lease or raise LeaseBusy naming the live owner.

    An owner on this host that is gone (or whose pid was reused) is replaced at once; an owner on
    another host only after ``stale_after`` and only with ``takeover``.
    """
    ticket_dir = layout.ticket_dir(ticket)
    durable.ensure_dir(ticket_dir)
    path = ticket_dir / LEASE
    me = owner.me()
    fd = durable.open_state(path, os.O_RDWR | os.O_CREAT, "lease")
    mirrored = False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(layout, ticket, fd)
            who = holder.describe() if holder else "another cairn process"
            raise LeaseBusy(
                f"ticket {ticket} is already being run by {who}; wait for it to finish "
                f"or stop it (cairn status shows it)"
            ) from None
        # recorded at once, so that a loser of the race can name this holder
        _mirror_owner(fd, me)
        mirrored = True
        previous = marker.read(layout.marker_path(ticket))
        reason = _judge(ticket, previous, stale_after, takeover, now or clock.now())
        lease = Lease(ticket, path, fd, previous=previous, takeover=reason, me=me)
        remote = previous.owner if previous is not None else None
        if reason is not None and remote is not None and remote.host != owner.this_host():
            lease.warning = (
                f"took ticket {ticket} over from {reason}; if that run is still alive on "
                f"{remote.host}, stop it there: two runs now write this ticket"
            )
        return lease
    except BaseException:
        if mirrored:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
        os.close(fd)
        raise


def _judge(
    ticket: str,
    previous: marker.Marker | None,
    stale_after: float,
    takeover: bool,
    now: datetime,
) -> str | None:
    """None to go ahead on a free ticket, a takeover reason, or LeaseBusy."""
    if previous is None or previous.owner is None:
        return None
    state, why = owner.check(previous.owner, previous.last_updated, stale_after, now)
    if state == "dead":
        return why
    if state == "alive":
        if previous.owner.pid == os.getpid() and previous.owner.host == owner.this_host():
            return None
        raise LeaseBusy(f"ticket {ticket} is already being run: {why}; wait for it or stop it")
    if state == "remote" and not takeover:
        raise LeaseBusy(
            f"ticket {ticket} is owned by another host: {why}; if that run is dead, pass "
            f"--takeover (it becomes stale after {owner.format_age(stale_after)} without updates)"
        )
    if not takeover:
        raise LeaseBusy(
            f"ticket {ticket} has a stale owner: {why}; pass --takeover to take it over"
        )
    return why


def _holder(layout: Layout, ticket: str, fd: int) -> Owner | None:
    """The lock holder as recorded; a holder met between its ``flock`` and its owner record is
    given ``RECORD_WAIT`` seconds to write it."""
    deadline = time.monotonic() + RECORD_WAIT
    while (holder := _recorded_owner(layout, ticket, fd)) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return holder


def _recorded_owner(layout: Layout, ticket: str, fd: int) -> Owner | None:
    """The lock holder as recorded, if that record is of a live process other than us."""
    candidates: list[Owner] = []
    with contextlib.suppress(BadInput):
        current = marker.read(layout.marker_path(ticket))
        if current is not None and current.owner is not None:
            candidates.append(current.owner)
    with contextlib.suppress(OSError, ValueError):
        candidates.append(msgspec.convert(json.loads(os.pread(fd, 4096, 0)), Owner, strict=False))
    now = clock.now()
    for candidate in candidates:
        if candidate.pid == os.getpid() and candidate.host == owner.this_host():
            continue
        if owner.check(candidate, now, 0, now)[0] in ("alive", "remote"):
            return candidate
    return None


def _mirror_owner(fd: int, me: Owner) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, msgspec.json.encode(me), 0)

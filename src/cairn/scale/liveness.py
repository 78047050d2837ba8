"""Liveness apart from progress, and blocking work an attempt can abandon.

A segment heartbeats from a task of its own every ``heartbeat_timeout / 3`` seconds, whatever
the segment is doing meanwhile (a rebuild, a checkpoint, a retry's jitter): Temporal delivers a
cancellation only through a heartbeat, and a silent attempt is taken for dead. The details of
every heartbeat are the last ``Progress`` whose shas are on the remote (``Liveness.pushed``);
liveness re-sends them, it never names anything new.

Blocking work (git, cairn's own snapshot code) runs in a thread. Its git processes carry
``CAIRN_SCALE_WORK=<token>`` (``ENV_SCALE_WORK``) in their environment, so a cancelled
attempt kills their process groups (and keeps killing new ones until the thread gives up)
instead of leaving a zombie thread that holds the ticket, a rebuild slot and a thread of the
pool."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from temporalio import activity

from cairn.terms import ENV_SCALE_WORK
from cairn.util import procs

T = TypeVar("T")

ABANDON_AFTER = 10.0  # seconds a cancelled attempt waits for its thread before it stops waiting


class Liveness:
    """The heartbeat task of one attempt."""

    def __init__(self, every: float, pushed: tuple[Any, ...] = ()) -> None:
        self.every = every
        self.details = pushed  # the previous attempt's last pushed Progress, until this one's
        self._task: asyncio.Task[None] | None = None

    def pushed(self, progress: Any) -> None:
        """``progress`` is on the remote: name it now and in every later heartbeat."""
        self.details = (progress,)
        activity.heartbeat(progress)

    async def _beat(self) -> None:
        while True:
            activity.heartbeat(*self.details)
            await asyncio.sleep(self.every)

    def __enter__(self) -> Liveness:
        self._task = asyncio.get_running_loop().create_task(self._beat())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()


class Stalled(TimeoutError):
    """Blocking work of an attempt ran past ``[temporal] work_timeout``: taken as hung (a git
    waiting on a dead remote, a stalled disk). The infrastructure's failure: retried."""


class Work:
    """The blocking work of one attempt: its tag, and the threads running it. ``limit``: the
    seconds one piece of work may take before it is taken as hung (liveness heartbeats go on
    while it runs, so without a limit a hung git would hold the ticket for ever)."""

    def __init__(self, limit: float | None = None) -> None:
        self.token = uuid.uuid4().hex
        self.env = {ENV_SCALE_WORK: self.token}
        self.limit = limit

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a thread; when the caller is cancelled meanwhile, or the work runs
        past ``limit``, the thread's git processes are killed until it ends (at most
        ABANDON_AFTER), then the cancellation goes on (or ``Stalled`` is raised)."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, lambda: fn(*args))
        try:
            return await asyncio.wait_for(asyncio.shield(future), self.limit)
        except TimeoutError:
            if future.done():
                raise  # the work's own TimeoutError
            future.add_done_callback(retrieved)
            await asyncio.shield(self._stop(future))
            name = getattr(fn, "__name__", "blocking work")
            raise Stalled(
                f"{name} ran past the work timeout of {self.limit:g}s and was stopped (a hung "
                "git or disk?); [temporal] work_timeout sets it"
            ) from None
        except asyncio.CancelledError:
            future.add_done_callback(retrieved)
            await asyncio.shield(self._stop(future))
            raise

    async def _stop(self, future: asyncio.Future[Any]) -> None:
        deadline = time.monotonic() + ABANDON_AFTER
        while not future.done() and time.monotonic() < deadline:
            await asyncio.to_thread(kill_tagged, self.token)
            with contextlib.suppress(TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(future), 0.05)


def retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # an abandoned thread's failure is expected: never "not retrieved"


def kill_tagged(token: str) -> int:
    """SIGKILL the process group of every process whose environment holds ``token``'s tag;
    how many were found."""
    import psutil

    found = 0
    mine = os.getpid()
    try:
        processes = list(psutil.process_iter())
    except (psutil.Error, OSError):
        return 0
    for process in processes:
        if process.pid == mine:
            continue
        try:
            tagged = process.environ().get(ENV_SCALE_WORK) == token
            group = os.getpgid(process.pid)
        except (psutil.Error, OSError):
            continue
        if tagged and group != os.getpgid(0):
            procs.kill_group(group)
            found += 1
    return found

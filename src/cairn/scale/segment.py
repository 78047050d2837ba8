"""The segment activity: one ``cairn run`` (first segment) or ``cairn resume`` (every later one,
and every retry) in the worker's worktree of the ticket, heartbeating what it pushed.

Each heartbeat is preceded by a checkpoint: snapshot, run state commit, push of the branch, the
snapshot ref and the state ref to the shared remote. A retry on any worker rebuilds the worktree
from those refs and resumes, so what survives a dead worker is what the last heartbeat named."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import sys
import time
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from cairn.errors import ExitCode
from cairn.fleet.watch import child_env
from cairn.remote.refs import Fenced
from cairn.scale import failures, roots, workspace
from cairn.scale.liveness import ABANDON_AFTER, Liveness, Work, retrieved
from cairn.scale.messages import (
    SegmentInput,
    SegmentResult,
    TicketInput,
)
from cairn.scale.outset import Outset, outset
from cairn.scale.workspace import STOP_GRACE
from cairn.terms import ENV_CHECKPOINT_DIR, ENV_CHECKPOINT_WAIT
from cairn.util import barrier, procs

TAIL_BYTES = 65536  # how much of the end of a segment's log its detail is read from
_log = logging.getLogger(__name__)
ASKS_POLL = 0.1  # seconds between looks for a checkpoint request (cairn.util.barrier)


class Segments:
    """The activities of one worker: its workspace root, shared by the tickets it runs.

    ``jitter``: a retried attempt (attempt > 1) starts after a random delay between half this
    many seconds and this many, heartbeating meanwhile, so the segments a Temporal restart timed
    out together do not all rebuild at once. ``rebuilds``: at most this many rebuilds at once on
    this worker (the remote sees at most workers x rebuilds fetches of whole tickets)."""

    def __init__(
        self, root: Path, jitter: float = 0.0, rebuilds: int = 2, stall: float | None = None
    ) -> None:
        self.root = root
        self.jitter = jitter
        self.stall = stall
        self.rebuilds = asyncio.Semaphore(rebuilds)
        self._collecting: asyncio.Future[bool] | None = None
        self._owners: dict[str, str] = {}  # ticket -> the work token of its latest attempt here

    @activity.defn(name="cairn_segment")
    async def run_segment(self, task: SegmentInput) -> SegmentResult:
        """The segment, its failure classified (``cairn.scale.failures``): the
        infrastructure's is retried without limit, the ticket's own counts against
        ``max_attempts``; a cancellation says one line."""
        try:
            return await self._segment(task)
        except asyncio.CancelledError:
            instead = failures.cancelled(task.ticket.ticket)
            if instead is None:
                raise
            raise instead from None
        except ApplicationError:
            raise
        except Exception as exc:
            raise failures.failed(task.ticket.ticket, exc) from exc

    async def _segment(self, task: SegmentInput) -> SegmentResult:
        info = activity.info()
        timeout = info.heartbeat_timeout.total_seconds() if info.heartbeat_timeout else 30.0
        with Liveness(max(0.5, timeout / 3), tuple(info.heartbeat_details)) as alive:
            if info.attempt > 1 and self.jitter > 0:
                # half of it at least: spread, and never close to no delay at all
                await asyncio.sleep(random.uniform(self.jitter / 2, self.jitter))
            work = Work(self.stall)
            self._owners[task.ticket.ticket] = work.token
            try:
                segment = f"{info.workflow_run_id}/{info.activity_id}"
                space = await self._rebuild(work, task.ticket, info.attempt, segment)
                return await self._run(work, alive, space, task, timeout)
            finally:
                # the push is on the remote (or the attempt is over: a retry rebuilds from
                # the remote): nothing of the ticket stays in the root — unless a newer
                # attempt of the ticket has started here meanwhile (its worktree now)
                if self._owners.get(task.ticket.ticket) == work.token:
                    del self._owners[task.ticket.ticket]
                    await self._cleanup(task.ticket)

    async def _cleanup(self, task: TicketInput) -> None:
        """Remove the ticket's leftovers, then collect the clone's garbage in the background
        (waited for at most ABANDON_AFTER: a zombie thread may hold the ticket)."""
        loop = asyncio.get_running_loop()
        try:
            cleanup = loop.run_in_executor(None, roots.finish, self.root, task)
        except RuntimeError:  # the worker shuts down: the next worker on the root sweeps it
            _log.warning("cairn: %s: cleanup left to the next worker's sweep", task.ticket)
            return
        cleanup.add_done_callback(self._collect)
        await asyncio.wait({cleanup}, timeout=ABANDON_AFTER)

    async def _rebuild(
        self, work: Work, task: TicketInput, attempt: int, segment: str
    ) -> workspace.Workspace:
        """``workspace.prepare`` in a thread, while fewer than ``rebuilds`` others run here; the
        slot is free again once the thread has ended (a cancelled one is stopped, or given up
        after ABANDON_AFTER)."""
        await self.rebuilds.acquire()
        try:
            return await work.run(workspace.prepare, self.root, task, attempt, work.env, segment)
        finally:
            self.rebuilds.release()

    def _collect(self, cleanup: asyncio.Future[None]) -> None:
        """Garbage-collect the clone in the background, once no rebuild holds it."""
        if not cleanup.cancelled() and cleanup.exception() is not None:
            _log.warning("cairn: cleanup failed: %s", cleanup.exception())
        if self._collecting is None or self._collecting.done():
            loop = asyncio.get_running_loop()
            try:
                self._collecting = loop.run_in_executor(None, roots.collect, self.root)
            except RuntimeError:  # the worker shuts down: a later worker collects
                return
            self._collecting.add_done_callback(retrieved)

    async def _run(
        self,
        work: Work,
        alive: Liveness,
        space: workspace.Workspace,
        task: SegmentInput,
        timeout: float,
    ) -> SegmentResult:
        every = alive.every
        asks = self.root / ".checkpoint-requests" / task.ticket.ticket
        barrier.reset(asks)
        progress = await work.run(workspace.checkpoint, space, "segment start")
        alive.pushed(progress)
        start = outset(space.state_dir)
        if start.command == "finished" and start.exit_code is not None:
            if start.exit_code in (ExitCode.OK, ExitCode.FAILURE):
                await work.run(workspace.commit_leftovers, space)
                progress = await work.run(workspace.checkpoint, space, "segment end")
                alive.pushed(progress)
            return SegmentResult(start.exit_code, progress, "the run had finished")
        command = self._command(space, task, start)
        log = self.root / ".logs" / f"{task.ticket.ticket}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            child = await asyncio.create_subprocess_exec(
                *command,
                cwd=space.worktree,
                env={
                    **child_env(),
                    ENV_CHECKPOINT_DIR: str(asks),
                    ENV_CHECKPOINT_WAIT: f"{barrier.wait_after(timeout):g}",
                },
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        workspace.remember_child(space, child.pid)
        last = time.monotonic()
        try:
            while True:
                try:
                    await asyncio.wait_for(asyncio.shield(child.wait()), ASKS_POLL)
                    break
                except TimeoutError:
                    pass
                # every `every` seconds, and at once when `cairn task done` waits for one
                waiting = barrier.pending(asks)
                if not waiting and time.monotonic() - last < every:
                    continue
                progress = await work.run(workspace.checkpoint, space, "heartbeat")
                alive.pushed(progress)
                barrier.release(waiting)  # a failed checkpoint raised: nothing is released
                last = time.monotonic()
        except asyncio.CancelledError:
            # cancelled, timed out at the server, or the worker shuts down: the run saves a
            # snapshot on SIGTERM; push what it saved before giving up the attempt (unless a
            # newer attempt owns the refs by then)
            await asyncio.to_thread(procs.stop_group, child.pid, STOP_GRACE)
            await child.wait()
            with contextlib.suppress(Fenced):
                await asyncio.to_thread(workspace.checkpoint, space, "cancelled")
            raise
        except Fenced as exc:
            # a newer attempt took the ticket (this worker was cut off from Temporal): stop
            activity.logger.warning("cairn: %s; stopping this attempt's run", exc)
            await asyncio.to_thread(procs.stop_group, child.pid, STOP_GRACE)
            await child.wait()
            raise
        except BaseException:
            # a failed checkpoint: stop the run as when cancelled, so cairn stops its agent
            # too (the agent has a process group of its own, which killing the run's misses)
            await asyncio.to_thread(procs.stop_group, child.pid, STOP_GRACE)
            raise
        code = child.returncode if child.returncode is not None else ExitCode.INTERRUPTED
        if code in (ExitCode.OK, ExitCode.FAILURE):
            await work.run(workspace.commit_leftovers, space)
        waiting = barrier.pending(asks)  # only requests made before this checkpoint began
        progress = await work.run(workspace.checkpoint, space, "segment end")
        alive.pushed(progress)
        barrier.release(waiting)  # never after a failed checkpoint: those report unconfirmed
        return SegmentResult(code if code >= 0 else int(ExitCode.INTERRUPTED), progress, _tail(log))

    @staticmethod
    def _command(space: workspace.Workspace, task: SegmentInput, start: Outset) -> list[str]:
        base = [sys.executable, "-m", "cairn"]
        if start.command == "resume":
            return [*base, "resume", task.ticket.ticket, "--takeover", "--json"]
        plan = str(space.plan_path(task.ticket))
        return [*base, "run", plan, "--ticket", task.ticket.ticket, "--takeover", "--json"]


def _tail(log: Path) -> str:
    """The segment's detail, from the last line its run wrote to ``log``: the outcome
    ``--json`` printed, as one line (``completed: 3 of 3 tasks``, an interruption's reason, a
    refusal's message); any other last line as it is."""
    try:
        with log.open("rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - TAIL_BYTES))
            lines = handle.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return ""
    if not lines:
        return ""
    return (_outcome_line(lines[-1]) or lines[-1])[-300:]


def _outcome_line(line: str) -> str | None:
    """``cairn run|resume --json``'s last line as a row's detail; None when it is not one."""
    try:
        said = json.loads(line)
    except ValueError:
        return None
    if not isinstance(said, dict):
        return None
    error = said.get("error")
    if isinstance(error, dict) and error.get("message"):
        return f"refused: {error['message']}"
    status = said.get("status")
    if not isinstance(status, str) or "exit_code" not in said:
        return None
    why = ": ".join(str(said[k]) for k in ("reason", "error") if said.get(k))
    parts = [part for part in (_counts(said.get("summary_path")), why) if part]
    text = status.replace("_", " ")
    return f"{text}: {'; '.join(parts)}" if parts else text


def _counts(path: object) -> str | None:
    """``3 of 3 tasks`` (or findings) from the run's change summary."""
    from cairn.summary import store

    if not isinstance(path, str):
        return None
    try:
        summary = store.load(Path(path))
    except Exception:  # a summary that does not read: the outcome's status alone
        return None
    if summary is None:
        return None
    unit = "tasks" if summary.mode == "implementation" else "findings"
    return f"{summary.resolved()} of {summary.total()} {unit}"

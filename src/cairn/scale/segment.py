"""The segment activity: one ``cairn run`` (first segment) or ``cairn resume`` (every later one,
and every retry) in the worker's worktree of the ticket, heartbeating what it pushed.

Each heartbeat is preceded by a checkpoint: snapshot, run state commit, push of the branch, the
snapshot ref and the state ref to the shared remote. A retry on any worker rebuilds the worktree
from those refs and resumes, so what survives a dead worker is what the last heartbeat named."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path

from temporalio import activity

from cairn.scale import workspace
from cairn.scale.messages import (
    COMPLETED,
    INTERRUPTED,
    NEEDS_REVIEW,
    SegmentInput,
    SegmentResult,
)
from cairn.scale.outset import Outset, outset
from cairn.scale.shared import Fenced
from cairn.scale.workspace import STOP_GRACE
from cairn.terms import ENV_CHECKPOINT_DIR, ENV_CHECKPOINT_WAIT
from cairn.util import barrier, procs

ASKS_POLL = 0.1  # seconds between looks for a checkpoint request (cairn.util.barrier)


class Segments:
    """The activities of one worker: its workspace root, shared by the tickets it runs."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @activity.defn(name="cairn_segment")
    async def run_segment(self, task: SegmentInput) -> SegmentResult:
        return await self._segment(task)

    async def _segment(self, task: SegmentInput) -> SegmentResult:
        info = activity.info()
        timeout = info.heartbeat_timeout.total_seconds() if info.heartbeat_timeout else 30.0
        every = max(0.5, timeout / 3)
        segment = f"{info.workflow_run_id}/{info.activity_id}"
        space = await asyncio.to_thread(
            workspace.prepare, self.root, task.ticket, info.attempt, segment
        )
        asks = self.root / ".checkpoint-requests" / task.ticket.ticket
        barrier.reset(asks)
        progress = await asyncio.to_thread(workspace.checkpoint, space, "segment start")
        activity.heartbeat(progress)
        start = outset(space.state_dir)
        if start.command == "finished" and start.exit_code is not None:
            if start.exit_code in (COMPLETED, NEEDS_REVIEW):
                await asyncio.to_thread(workspace.commit_leftovers, space)
                progress = await asyncio.to_thread(workspace.checkpoint, space, "segment end")
            return SegmentResult(start.exit_code, progress, "the run had finished")
        command = self._command(space, task, start)
        log = self.root / ".logs" / f"{task.ticket.ticket}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            child = await asyncio.create_subprocess_exec(
                *command,
                cwd=space.worktree,
                env={
                    **_child_env(),
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
                progress = await asyncio.to_thread(workspace.checkpoint, space, "heartbeat")
                activity.heartbeat(progress)
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
        code = child.returncode if child.returncode is not None else INTERRUPTED
        if code in (COMPLETED, NEEDS_REVIEW):
            await asyncio.to_thread(workspace.commit_leftovers, space)
        waiting = barrier.pending(asks)  # only requests made before this checkpoint began
        progress = await asyncio.to_thread(workspace.checkpoint, space, "segment end")
        activity.heartbeat(progress)
        barrier.release(waiting)  # never after a failed checkpoint: those report unconfirmed
        return SegmentResult(code if code >= 0 else INTERRUPTED, progress, _tail(log))

    @staticmethod
    def _command(space: workspace.Workspace, task: SegmentInput, start: Outset) -> list[str]:
        base = [sys.executable, "-m", "cairn"]
        if start.command == "resume":
            return [*base, "resume", task.ticket.ticket, "--takeover", "--json"]
        plan = str(space.plan_path(task.ticket))
        return [*base, "run", plan, "--ticket", task.ticket.ticket, "--takeover", "--json"]


def _child_env() -> dict[str, str]:
    keep = {"CAIRN_DEBUG"}
    return {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_") or k in keep}


def _tail(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][-300:] if lines else ""

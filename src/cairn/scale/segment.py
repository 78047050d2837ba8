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
from pathlib import Path

from temporalio import activity

from cairn.scale import workspace
from cairn.scale.messages import INTERRUPTED, SegmentInput, SegmentResult
from cairn.scale.shared import Fenced
from cairn.scale.workspace import STOP_GRACE
from cairn.util import procs


class Segments:
    """The activities of one worker: its workspace root, shared by the tickets it runs."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @activity.defn(name="cairn_segment")
    async def run_segment(self, task: SegmentInput) -> SegmentResult:
        info = activity.info()
        timeout = info.heartbeat_timeout.total_seconds() if info.heartbeat_timeout else 30.0
        every = max(0.5, timeout / 3)
        space = await asyncio.to_thread(workspace.prepare, self.root, task.ticket, info.attempt)
        progress = await asyncio.to_thread(workspace.checkpoint, space, "segment start")
        activity.heartbeat(progress)
        command = self._command(space, task)
        log = self.root / ".logs" / f"{task.ticket.ticket}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            child = await asyncio.create_subprocess_exec(
                *command,
                cwd=space.worktree,
                env=_child_env(),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        workspace.remember_child(space, child.pid)
        try:
            while True:
                try:
                    await asyncio.wait_for(asyncio.shield(child.wait()), every)
                    break
                except TimeoutError:
                    pass
                progress = await asyncio.to_thread(workspace.checkpoint, space, "heartbeat")
                activity.heartbeat(progress)
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
            procs.kill_group(child.pid)
            raise
        code = child.returncode if child.returncode is not None else INTERRUPTED
        progress = await asyncio.to_thread(workspace.checkpoint, space, "segment end")
        activity.heartbeat(progress)
        return SegmentResult(code if code >= 0 else INTERRUPTED, progress, _tail(log))

    @staticmethod
    def _command(space: workspace.Workspace, task: SegmentInput) -> list[str]:
        base = [sys.executable, "-m", "cairn"]
        if space.has_run:
            return [*base, "resume", task.ticket.ticket, "--takeover", "--json"]
        plan = str(space.plan_path(task.ticket))
        return [*base, "run", plan, "--ticket", task.ticket.ticket, "--json"]


def _child_env() -> dict[str, str]:
    keep = {"CAIRN_DEBUG"}
    return {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_") or k in keep}


def _tail(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][-300:] if lines else ""

"""Liveness is not progress (issue 23, items 2 and 10): a segment heartbeats while it rebuilds a
big worktree, rebuilds of several slots run at once (at most ``[temporal] rebuilds`` of them), a
cancelled rebuild frees its slot, and only a retried attempt waits its jitter."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import CancelledError

from cairn.config import load
from cairn.scale.messages import TicketInput
from cairn.terms import ENV_SCALE_WORK
from cairn.util import procs
from scale import temporal_server
from scale.scale_setup import agent_env, events, leftovers, shared_repo, start_worker, wait_for

# Enough files that a rebuild (a worktree add, a first snapshot) takes about a second on this
# machine: four of them one after another, as under the old lock of the whole root, overrun a 1 s
# heartbeat timeout.
FILES = 4000


def rebuilding(root: Path) -> dict[int, str]:
    """The git processes of rebuilds in ``root`` now (a fetch or a worktree add of a segment):
    pid -> the attempt's work tag."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        tags = [v for v in environ if v.startswith(f"{ENV_SCALE_WORK}=".encode())]
        if tags and cwd.startswith(str(root)) and (b"fetch" in argv or b"worktree" in argv):
            found[int(entry)] = tags[0].decode()
    return found


async def started_attempts(address: str, workflow_ids: list[str]) -> list[int]:
    """The attempt of every segment that started, from the workflows' histories."""
    client = await Client.connect(address)
    found: list[int] = []
    for wid in workflow_ids:
        history = await client.get_workflow_handle(wid).fetch_history()
        for event in history.events:
            if event.HasField("activity_task_started_event_attributes"):
                found.append(event.activity_task_started_event_attributes.attempt)
    return found


@pytest.mark.slow
def test_slots_rebuild_a_big_repository_at_once_without_missing_a_heartbeat(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    tickets = {f"L-{n}": 1 for n in range(4)}
    user = shared_repo(tmp_path, temporal.address, tickets, "1s", "rebuilds = 2\n", FILES)
    env = agent_env(tmp_path)
    root = tmp_path / "w1"
    worker = start_worker(user, root, env, "--concurrency", "4")
    most, watching = 0, True

    def watch() -> None:
        nonlocal most
        while watching:
            most = max(most, len(set(rebuilding(root).values())))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        # with retries (a heartbeat missed), the backoff alone would take longer than this
        result = subprocess.run(
            [sys.executable, "-m", "cairn", "fleet", "start", "--once", "--json"],
            cwd=user,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        watching = False
        watcher.join()
        worker.stop()
    assert result.returncode == 0, (result.stdout, result.stderr)
    seen = events(result.stdout)
    assert seen[-1]["tickets"] == dict.fromkeys(tickets, "completed")
    ids = [e["workflow_id"] for e in seen if e["event"] == "ticket_started"]
    assert asyncio.run(started_attempts(temporal.address, ids)) == [1] * 4  # no retry at all
    assert 1 <= most <= 2  # [temporal] rebuilds bounds the rebuilds at once
    assert leftovers(root) == []  # worktrees, branches, plans, pid files, logs: all removed


def ticket(user: Path, name: str, remote: Path) -> TicketInput:
    return TicketInput(
        ticket=name,
        plan_name=f"{name}.md",
        plan=f"# Plan: {name}\n\n### Task 1: Step 1\n\nDo step 1.\n",
        remote=str(remote),
        base="main",
        heartbeat_seconds=2.0,
    )


async def start(client: Client, user: Path, task: TicketInput) -> WorkflowHandle[Any, Any]:
    return await client.start_workflow(
        "cairn_ticket",
        task,
        id=f"test:{uuid.uuid4().hex[:8]}:{task.ticket}",
        task_queue=load(user).temporal.task_queue,
    )


def test_a_cancelled_rebuild_frees_its_slot(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    user = shared_repo(tmp_path, temporal.address, {}, "2s", files=FILES // 4)
    bare = tmp_path / "shared.git"
    root = tmp_path / "w1"
    worker = start_worker(user, root, agent_env(tmp_path), "--concurrency", "1")

    def stall(name: str) -> int | None:
        for entry in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                if b"worktree" in argv and str(root / name).encode() in argv:
                    os.kill(int(entry), signal.SIGSTOP)  # a hung git (a stalled disk, NFS)
                    return int(entry)
        return None

    async def main() -> int:
        client = await Client.connect(temporal.address)
        first = await start(client, user, ticket(user, "F-1", bare))
        stalled: int = await asyncio.to_thread(
            wait_for, "F-1's worktree add", lambda: stall("F-1"), 60, 0.02
        )
        await first.cancel()
        # the only slot: the next ticket runs once the cancelled attempt gave it back
        second = await start(client, user, ticket(user, "F-2", bare))
        assert await asyncio.wait_for(second.result(), 60) == "completed"
        return stalled

    try:
        stalled = asyncio.run(main())
    finally:
        worker.stop()
    assert not procs.pid_alive(stalled)  # the stalled git was killed
    assert not (root / "F-1").exists()


def test_only_a_retried_attempt_waits_its_jitter(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    user = shared_repo(tmp_path, temporal.address, {}, "2s", 'retry_jitter = "600s"\n')
    worker = start_worker(user, tmp_path / "w1", agent_env(tmp_path))

    async def main() -> None:
        client = await Client.connect(temporal.address)
        # a remote that is not there: every attempt fails as soon as it rebuilds
        handle = await start(client, user, ticket(user, "J-1", tmp_path / "nowhere.git"))

        async def pending() -> Any:
            described = await handle.describe()
            return next(iter(described.raw_description.pending_activities), None)

        began = time.monotonic()
        while getattr(await pending(), "attempt", 0) < 2:
            await asyncio.sleep(0.1)
        # attempt 1 failed at once (1 s of retry backoff, no jitter)
        assert time.monotonic() - began < 5
        assert "nowhere.git" in (await pending()).last_failure.message
        await asyncio.sleep(5)  # attempt 2 waits (300 to 600 s) and heartbeats meanwhile
        assert (await pending()).attempt == 2
        await handle.cancel()  # delivered through a heartbeat of the waiting attempt
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 20)
        assert isinstance(failed.value.cause, CancelledError)

    try:
        asyncio.run(main())
    finally:
        worker.stop()


def test_a_hung_rebuild_is_stopped_at_the_work_timeout_and_retried(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    """Liveness heartbeats go on while a rebuild runs, so a git that hangs for ever would hold
    the ticket for ever: past ``[temporal] work_timeout`` it is killed, the attempt fails (the
    infrastructure's) and the retry completes the ticket."""
    user = shared_repo(tmp_path, temporal.address, {}, "2s", 'work_timeout = "3s"\n', FILES // 4)
    bare = tmp_path / "shared.git"
    root = tmp_path / "w1"
    worker = start_worker(user, root, agent_env(tmp_path), "--concurrency", "1")

    def stall() -> int | None:
        for pid, _ in rebuilding(root).items():
            with contextlib.suppress(OSError):
                if b"worktree" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                    os.kill(pid, signal.SIGSTOP)  # a hung git: it never ends on its own
                    return pid
        return None

    async def main() -> tuple[int, str]:
        client = await Client.connect(temporal.address)
        handle = await start(client, user, ticket(user, "H-1", bare))
        stalled: int = await asyncio.to_thread(wait_for, "H-1's worktree add", stall, 60, 0.02)
        state = await asyncio.wait_for(handle.result(), 60)
        history = await handle.fetch_history()
        failures = [
            e.activity_task_failed_event_attributes.failure.message
            for e in history.events
            if e.HasField("activity_task_failed_event_attributes")
        ]
        retried = [
            e.activity_task_started_event_attributes.last_failure.message
            for e in history.events
            if e.HasField("activity_task_started_event_attributes")
        ]
        return stalled, f"{state} {failures} {retried}"

    try:
        stalled, seen = asyncio.run(main())
    finally:
        worker.stop()
    assert seen.startswith("completed"), seen
    assert "work timeout of 3s" in seen, seen  # the attempt said why it gave up
    assert not procs.pid_alive(stalled)  # the hung git was killed

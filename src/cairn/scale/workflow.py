"""The ticket workflow: a ticket's segments, one activity each, until the run completes, needs
review, is refused, or stays interrupted after ``max_segments``. Deterministic: it only decides
what to run next from the segments' results and the signals it got; all I/O is in the activity.

A segment that fails for the infrastructure's reasons is retried by Temporal without a count
limit (``retry_policy``); one that fails on the ticket's own error (``cairn_ticket``, or a
run that exits 2) is run again after a backoff, until ``max_attempts`` of them failed.

Signals ``pause`` and ``resume``; cancelling the workflow stops the ticket (``cairn fleet stop
TICKET``). Both cancel the running segment and wait for it: the run snapshots and the activity
pushes before it gives up. The state is answered by the ``status`` query and mirrored in the
workflow's memo (``cairn``), which listing reads without a worker."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from cairn.errors import ExitCode
    from cairn.scale.failures import TICKET
    from cairn.scale.messages import (
        Carried,
        Progress,
        SegmentInput,
        SegmentResult,
        TicketInput,
    )
    from cairn.terms import WorkflowState

# A segment runs as long as its run does; the heartbeat timeout, not this, notices a dead worker.
SEGMENT_LIMIT = timedelta(hours=12)
FIRST_BACKOFF = 1.0  # seconds before a failed segment's first retry, doubling to max_backoff
MEMO = "cairn"
ASKED_KEPT = 20  # the asks a ticket's memo keeps, newest last


def retry_policy(task: TicketInput) -> RetryPolicy:
    """An infrastructure failure (``cairn_infra``: remote, Temporal, disk, a dead worker) is
    retried without a count limit, its backoff capped at ``[temporal] max_backoff``; the
    ticket's own (``cairn_ticket``) is not retried here: the workflow counts it."""
    cap = max(0.001, task.max_backoff_seconds)
    return RetryPolicy(
        initial_interval=timedelta(seconds=min(FIRST_BACKOFF, cap)),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=cap),
        maximum_attempts=0,
        non_retryable_error_types=[TICKET],
    )


@workflow.defn(name="cairn_ticket")
class TicketWorkflow:
    def __init__(self) -> None:
        self.ticket = ""
        self.state: WorkflowState = "queued"
        self.carried = Carried()

    @workflow.run
    async def run(self, task: TicketInput) -> str:
        self.ticket = task.ticket
        self.carried = task.carried or Carried()
        try:
            return await self._segments(task)
        except asyncio.CancelledError:
            self._set("stopped")
            raise

    async def _segments(self, task: TicketInput) -> str:
        runs_here = 0
        while True:
            if self.carried.paused:
                self._set("paused")
                await workflow.wait_condition(lambda: not self.carried.paused)
            if runs_here >= task.continue_every:
                workflow.continue_as_new(dataclasses.replace(task, carried=self.carried))
            runs_here += 1
            self.carried.segments += 1
            self._set("running")
            result = await self._segment(task)
            if result is None:  # paused mid-segment: its run was stopped with a snapshot
                continue
            self.carried.progress, self.carried.detail = result.progress, result.detail
            if result.exit_code == ExitCode.INTERRUPTED:
                self.carried.interrupted += 1
                if self.carried.interrupted < task.max_segments:
                    continue
            if result.exit_code == ExitCode.BAD_INPUT:  # the ticket's own error: counted, run again
                self.carried.failures += 1
                used = f"{self.carried.failures} of {task.max_attempts} attempts failed"
                self.carried.detail = f"{result.detail or 'cairn refused the run'} ({used})"
                if self.carried.failures < task.max_attempts:
                    self._set("retrying")
                    await workflow.sleep(_backoff(task, self.carried.failures))
                    continue
            return self._set(_state(result.exit_code))

    async def _segment(self, task: TicketInput) -> SegmentResult | None:
        """One segment's result; None when a pause cancelled it (its run snapshotted and the
        activity pushed before giving up)."""
        handle = workflow.start_activity(
            "cairn_segment",
            SegmentInput(task, self.carried.segments),
            result_type=SegmentResult,
            start_to_close_timeout=SEGMENT_LIMIT,
            heartbeat_timeout=timedelta(seconds=task.heartbeat_seconds),
            retry_policy=retry_policy(task),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
        try:
            await workflow.wait_condition(lambda: handle.done() or self.carried.paused)
        except asyncio.CancelledError:  # the ticket is stopped: its segment stops first
            self._set("stopping")
            handle.cancel()
            with contextlib.suppress(ActivityError, asyncio.CancelledError):
                await handle
            raise
        if not handle.done():
            self._set("pausing")
            handle.cancel()
        try:
            result: SegmentResult = await handle
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError):
                return None
            progress = self.carried.progress or Progress(attempt=0)
            return SegmentResult(int(ExitCode.BAD_INPUT), progress, _cause(exc))
        return result

    @workflow.signal
    def pause(self) -> None:
        self.carried.paused = True

    @workflow.signal
    def resume(self) -> None:
        self.carried.paused = False

    @workflow.signal
    def asked(self, action: str, by: str) -> None:
        """Who asked ``action`` of the ticket (``cli``, ``dashboard``, ``api``), sent before the
        action itself, so the memo's ``asked`` says it beside what the workflow did."""
        entry = {"action": action, "by": by, "at": workflow.now().isoformat()}
        self.carried.asked = [*self.carried.asked, entry][-ASKED_KEPT:]
        workflow.upsert_memo({MEMO: self.status()})

    @workflow.query
    def status(self) -> dict[str, Any]:
        progress = self.carried.progress
        return {
            "ticket": self.ticket,
            "state": self.state,
            "paused": self.carried.paused,
            "segments": self.carried.segments,
            "interrupted": self.carried.interrupted,
            "failures": self.carried.failures,
            "attempt": progress.attempt if progress else None,
            "snapshot": progress.snapshot if progress else None,
            "branch": progress.branch if progress else None,
            "marker": dict(progress.marker) if progress else {},
            "detail": self.carried.detail,
            "asked": list(self.carried.asked),
        }

    def _set(self, state: WorkflowState) -> WorkflowState:
        if state != self.state:
            self.state = state
            workflow.upsert_memo({MEMO: self.status()})
        return state


def _cause(exc: BaseException) -> str:
    """What the last attempt of a segment raised, as one line: the classified failure's
    message (``cairn.scale.failures``), else the innermost message of the chain."""
    found = exc.__cause__
    if isinstance(found, ApplicationError) and found.type == TICKET:
        return found.message
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return " ".join(str(exc).split())[:300]


def _backoff(task: TicketInput, failures: int) -> timedelta:
    cap = max(0.001, task.max_backoff_seconds)
    return timedelta(seconds=min(cap, FIRST_BACKOFF * 2 ** max(0, failures - 1)))


def _state(exit_code: int) -> WorkflowState:
    if exit_code == ExitCode.OK:
        return "completed"
    if exit_code == ExitCode.FAILURE:
        return "needs_review"
    if exit_code == ExitCode.INTERRUPTED:
        return "interrupted"
    return "failed"

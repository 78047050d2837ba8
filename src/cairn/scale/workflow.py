"""The ticket workflow: a ticket's segments, one activity each, until the run completes, needs
review, is refused, or stays interrupted after ``max_segments``. Deterministic: it only decides
what to run next from the segments' results; all I/O is in the activity."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from cairn.scale.messages import (
        COMPLETED,
        INTERRUPTED,
        NEEDS_REVIEW,
        Progress,
        SegmentInput,
        SegmentResult,
        TicketInput,
    )

# A segment runs as long as its run does; the heartbeat timeout, not this, notices a dead worker.
SEGMENT_LIMIT = timedelta(hours=12)
RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=1),
    maximum_attempts=20,
)


@workflow.defn(name="cairn_ticket")
class TicketWorkflow:
    def __init__(self) -> None:
        self.state = "queued"
        self.segments = 0
        self.progress: Progress | None = None
        self.detail = ""

    @workflow.run
    async def run(self, task: TicketInput) -> str:
        while True:
            self.segments += 1
            self.state = "running"
            result = await workflow.execute_activity(
                "cairn_segment",
                SegmentInput(task, self.segments),
                result_type=SegmentResult,
                start_to_close_timeout=SEGMENT_LIMIT,
                heartbeat_timeout=timedelta(seconds=task.heartbeat_seconds),
                retry_policy=RETRY,
            )
            self.progress, self.detail = result.progress, result.detail
            if result.exit_code == INTERRUPTED and self.segments < task.max_segments:
                continue
            self.state = _state(result.exit_code)
            return self.state

    @workflow.query
    def status(self) -> dict[str, object]:
        progress = self.progress
        return {
            "state": self.state,
            "segments": self.segments,
            "attempt": progress.attempt if progress else None,
            "snapshot": progress.snapshot if progress else None,
            "branch": progress.branch if progress else None,
            "marker": dict(progress.marker) if progress else {},
            "detail": self.detail,
        }


def _state(exit_code: int) -> str:
    if exit_code == COMPLETED:
        return "completed"
    if exit_code == NEEDS_REVIEW:
        return "needs_review"
    if exit_code == INTERRUPTED:
        return "interrupted"
    return "failed"

"""``cairn fleet status`` and the dashboard on the temporal engine: one row per ticket workflow
of this repository, read from Temporal, not from local files.

A listing (visibility) gives every run of the repository's ``cairn_ticket`` workflows with its
memo, where the workflow mirrors its state (``workflow.MEMO``); the latest run of each
workflow id makes the row. A running workflow adds what only the server knows now: its pending
segment's attempt and last heartbeat (``describe``, no worker needed) and its ``status`` query
(a worker must answer; when none does within ``QUERY_TIMEOUT``, the memo stands in and the rest
of the listing stops asking). No call blocks on a worker, so a fleet whose workers are all gone
is still listed."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
)
from temporalio.service import RPCError, RPCStatusCode

from cairn.fleet.fleetstatus import SHORT_SHA, FleetRow
from cairn.scale.messages import Progress, workflow_id
from cairn.state.layout import Layout
from cairn.terms import FINAL_STATES

WORKFLOW_TYPE = "cairn_ticket"
MEMO = "cairn"  # workflow.MEMO, without importing the workflow module (and its sandbox)
CONCURRENCY = 24  # describe/query calls in flight at once
QUERY_TIMEOUT = timedelta(seconds=1)
_CLOSED = {
    WorkflowExecutionStatus.CANCELED: "stopped",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.TERMINATED: "failed",
    WorkflowExecutionStatus.TIMED_OUT: "failed",
}


@dataclass
class Listing:
    rows: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    queried: bool = True  # False once a query went unanswered: no worker answers queries


def prefix(key: str) -> str:
    """What every ticket workflow id of the repository whose fleet key is ``key``
    (``cairn.scale.remote.fleet_key``) starts with; ``remote`` below is that key."""
    return workflow_id(key, "")


async def executions(client: Client, remote: str) -> list[WorkflowExecution]:
    """The latest run of each of the repository's ticket workflows, by ticket."""
    start = prefix(remote)
    query = f'WorkflowType = "{WORKFLOW_TYPE}" AND WorkflowId STARTS_WITH "{start}"'
    try:
        found = [w async for w in client.list_workflows(query)]
    except RPCError as exc:  # a visibility store without STARTS_WITH: filter here
        if exc.status != RPCStatusCode.INVALID_ARGUMENT:
            raise
        found = [w async for w in client.list_workflows(f'WorkflowType = "{WORKFLOW_TYPE}"')]
    latest: dict[str, WorkflowExecution] = {}
    for execution in found:
        if not execution.id.startswith(start):
            continue
        known = latest.get(execution.id)
        if known is None or execution.start_time > known.start_time:
            latest[execution.id] = execution
    return sorted(latest.values(), key=lambda e: e.id)


async def listing(client: Client, remote: str, ticket: str | None = None) -> Listing:
    """Every ticket's row (or only ``ticket``'s), sorted by ticket."""
    found = await executions(client, remote)
    start = prefix(remote)
    if ticket is not None:
        found = [e for e in found if e.id == start + ticket]
    report = Listing()
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(execution: WorkflowExecution) -> dict[str, Any]:
        async with gate:
            return await _row(client, execution, execution.id[len(start) :], report)

    report.rows = list(await asyncio.gather(*(one(e) for e in found)))
    return report


async def _row(
    client: Client, execution: WorkflowExecution, ticket: str, report: Listing
) -> dict[str, Any]:
    memo = await execution.memo()
    facts: dict[str, Any] = dict(memo.get(MEMO) or {})
    running = execution.status == WorkflowExecutionStatus.RUNNING
    live: dict[str, Any] = {}
    if running:
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        described, answer = await asyncio.gather(
            handle.describe(), _query(client, execution, report)
        )
        facts.update(answer or {})
        live = _pending(described)
    return _shape(ticket, execution, facts, live)


async def _query(
    client: Client, execution: WorkflowExecution, report: Listing
) -> dict[str, Any] | None:
    if not report.queried:
        return None
    handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
    try:
        answer: dict[str, Any] = await handle.query("status", rpc_timeout=QUERY_TIMEOUT)
    except Exception as exc:  # no worker answered in time, or none could: the memo stands in
        if report.queried:
            report.queried = False
            why = (str(exc).splitlines() or [type(exc).__name__])[0][:120] or type(exc).__name__
            report.warnings.append(
                f"no worker answered the status query ({why}); states are the workflows' "
                "memos (what they said at their last change) and their segments' last heartbeats"
            )
        return None
    return answer


def _pending(described: WorkflowExecutionDescription) -> dict[str, Any]:
    """The running segment's attempt, last heartbeat and worker, from ``describe``."""
    for pending in described.raw_description.pending_activities:
        if pending.activity_type.name != "cairn_segment":
            continue
        live: dict[str, Any] = {
            "attempt": pending.attempt,
            "waiting": pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED,
            "identity": pending.last_worker_identity or None,
        }
        if pending.HasField("last_heartbeat_time"):
            live["heartbeat_at"] = pending.last_heartbeat_time.ToDatetime(tzinfo=UTC)
        if pending.HasField("last_failure") and pending.last_failure.message:
            live["last_failure"] = one_line(pending.last_failure.message)
        payloads = pending.heartbeat_details.payloads
        if payloads:
            converter = described.data_converter.payload_converter
            # a heartbeat of another version: its server-side facts stand
            with contextlib.suppress(Exception):
                live["progress"] = converter.from_payloads(payloads, [Progress])[0]
        return live
    return {}


def _state(execution: WorkflowExecution, facts: dict[str, Any]) -> str:
    if execution.status in _CLOSED:
        return _CLOSED[execution.status]
    state: str = facts.get("state") or "queued"
    if execution.status == WorkflowExecutionStatus.COMPLETED and state not in FINAL_STATES:
        return "completed"
    return state


def _shape(
    ticket: str, execution: WorkflowExecution, facts: dict[str, Any], live: dict[str, Any]
) -> dict[str, Any]:
    """The row: the embedded fleet's keys (``FleetRow``'s and ``usage``), null where the
    workflow does not know them, then the temporal engine's own."""
    now = datetime.now(UTC)
    state = _state(execution, facts)
    marker: dict[str, str] = dict(facts.get("marker") or {})
    attempt = facts.get("attempt")
    snapshot, branch_sha, worker = facts.get("snapshot"), facts.get("branch"), None
    progress: Progress | None = live.get("progress")
    if progress is not None:
        marker = dict(progress.marker) or marker
        snapshot = progress.snapshot or snapshot
        branch_sha = progress.branch or branch_sha
        worker = progress.worker or None
    if live:
        attempt = live["attempt"]
        if worker is None and not live["waiting"]:
            worker = live["identity"]
    heartbeat: datetime | None = live.get("heartbeat_at")
    closed = execution.close_time
    detail = facts.get("detail") or None
    # a retry that has not pushed yet (its backoff, its jitter, its rebuild) still waits on the
    # failure before it: the heartbeat details are the previous attempt's until its first push
    retry = bool(attempt and attempt > 1 and live.get("last_failure"))
    unpushed = progress is None or progress.attempt < (attempt or 0)
    if state == "running" and retry and (live.get("waiting") or unpushed):
        state, detail = "retrying", f"waiting: {live['last_failure']}"
    elif state == "running" and live.get("waiting"):
        # no worker runs the segment now: `running` counts only segments a worker runs
        state, detail = "queued", "the segment waits for a worker"
    elif state == "retrying" and detail:  # the ticket's own error: run again after a backoff
        detail = f"waiting: {detail}"
    task = marker.get("task")
    row: dict[str, Any] = dict.fromkeys(FleetRow.__struct_fields__) | {"usage": None}
    row.update(
        ticket=ticket,
        state=state,
        phase=marker.get("phase") or None,
        task=int(task) if task and task.isdigit() else None,
        attempt=attempt if attempt is not None else 0,
        snapshot=snapshot[:SHORT_SHA] if snapshot else None,
        snapshot_age_seconds=_age(heartbeat, now) if snapshot and running(state) else None,
        branch=f"cairn/{ticket}",
        last_event="heartbeat" if heartbeat is not None else None,
        last_event_age_seconds=_age(heartbeat, now),
        detail=detail,
        run=marker.get("run") or None,
        updated=(heartbeat or closed or execution.start_time).isoformat(),
    )
    return (
        row
        | {  # the temporal engine's own facts
            "engine": "temporal",
            "workflow_id": execution.id,
            "run_id": execution.run_id,
            "segments": int(facts.get("segments") or 0),
            "paused": bool(facts.get("paused")),
            "branch_sha": branch_sha[:SHORT_SHA] if branch_sha else None,
            "worker": worker if running(state) else None,
            "started_at": execution.start_time.isoformat(),
            "closed_at": closed.isoformat() if closed else None,
            "asked": [dict(a) for a in facts.get("asked") or [] if isinstance(a, dict)],
        }
    )


def refused_rows(layout: Layout, warnings: list[str]) -> list[dict[str, Any]]:
    """The queue entries and issues ``cairn fleet start`` refused (kept by the starter in
    ``fleet/refused.json``), as rows of this listing: state ``refused``, ``detail`` why and
    the fix; they have no workflow."""
    from cairn.fleet import refusals
    from cairn.fleet.fleetstatus import refused_row

    extra: dict[str, Any] = {"engine": "temporal", "workflow_id": None, "run_id": None}
    extra |= {"segments": 0}
    extra |= {"paused": False, "branch_sha": None, "worker": None}
    extra |= {"started_at": None, "closed_at": None, "usage": None, "branch": None, "asked": []}
    return [refused_row(r) | extra for r in refusals.read(layout, warnings)]


def one_line(text: str, limit: int = 200) -> str:
    """A failure's message as one line of a row's detail: its first line, shortened."""
    first = (text.strip().splitlines() or [""])[0].strip()
    return first if len(first) <= limit else first[: limit - 1] + "…"


def running(state: str) -> bool:
    return state in ("running", "pausing", "stopping")


def _age(at: datetime | None, now: datetime) -> int | None:
    return None if at is None else max(0, int((now - at).total_seconds()))

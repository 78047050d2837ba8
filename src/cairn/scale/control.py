"""``cairn fleet stop|pause|resume TICKET…`` with ``engine = "temporal"``: cancel a ticket's
workflow (its segment stops with a snapshot pushed first) or signal it to pause or resume."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.service import RPCError, RPCStatusCode

from cairn.config.records import TemporalConfig
from cairn.errors import BadInput
from cairn.scale.messages import TicketInput, workflow_id
from cairn.scale.workflow import MEMO, TicketWorkflow

ACTIONS = ("stop", "pause", "resume")
ENDED_FAILED = (
    WorkflowExecutionStatus.FAILED,
    WorkflowExecutionStatus.TERMINATED,
    WorkflowExecutionStatus.TIMED_OUT,
)


@dataclass
class Done:
    ticket: str
    workflow_id: str
    state: str  # the ticket's state afterwards, from the workflow's memo
    changed: bool  # False: it was not running (stop), or already so (pause/resume)


async def running(client: Client, key: str) -> list[str]:
    """The tickets of this repository (``remote.fleet_key``) whose workflows run."""
    prefix = workflow_id(key, "")
    query = 'WorkflowType = "cairn_ticket" AND ExecutionStatus = "Running"'
    found = [w.id async for w in client.list_workflows(query) if w.id.startswith(prefix)]
    return sorted(wid.removeprefix(prefix) for wid in found)


async def act(client: Client, key: str, action: str, tickets: list[str], wait: float) -> list[Done]:
    """Apply ``action`` to each ticket; every ticket must have a workflow (checked first, so a
    typo changes nothing)."""
    handles = {t: client.get_workflow_handle(workflow_id(key, t)) for t in tickets}
    states: dict[str, tuple[bool, str]] = {}
    for ticket, handle in handles.items():
        try:
            states[ticket] = await state_of(handle)
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            raise BadInput(
                f"ticket {ticket} has no workflow on this task queue's namespace; start it with "
                "cairn fleet start (cairn fleet status lists the tickets)"
            ) from None
    done: list[Done] = []
    for ticket, handle in handles.items():
        live, state = states[ticket]
        if not live:
            done.append(Done(ticket, handle.id, state, False))
            continue
        wanted = {"stop": "stopped", "pause": "paused", "resume": "running"}[action]
        if (action == "pause" and state == "paused") or (action == "resume" and state != "paused"):
            done.append(Done(ticket, handle.id, state, False))
            continue
        if action == "stop":
            await handle.cancel()
        elif action == "pause":
            await handle.signal(TicketWorkflow.pause)
        else:
            await handle.signal(TicketWorkflow.resume)
        done.append(Done(ticket, handle.id, await _settle(handle, wanted, wait), True))
    return done


async def retryable(client: Client, key: str, tickets: list[str]) -> dict[str, str]:
    """ticket → the final state ``cairn fleet retry`` restarts it from (failed, interrupted,
    stopped); any other ticket refuses the whole retry, before anything changed."""
    found: dict[str, str] = {}
    for ticket in tickets:
        handle = client.get_workflow_handle(workflow_id(key, ticket))
        try:
            live, state = await state_of(handle)
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            raise BadInput(
                f"ticket {ticket} has no workflow, so there is nothing to retry; cairn fleet "
                "start starts it"
            ) from None
        if live:
            raise BadInput(
                f"ticket {ticket} is {state}, not ended, so there is nothing to retry; cairn "
                f"fleet stop {ticket} first to restart it"
            )
        if state == "completed":
            raise BadInput(
                f"ticket {ticket} is completed, so there is nothing to retry; to run its plan "
                "again, give it a new ticket id"
            )
        if state == "needs_review":
            raise BadInput(
                f"ticket {ticket} needs review (its run finished), so there is nothing to retry; "
                f"review its branch cairn/{ticket}"
            )
        found[ticket] = state
    return found


async def retry(
    client: Client, config: TemporalConfig, key: str, tasks: list[TicketInput]
) -> dict[str, str]:
    """ticket → the run id of a new run of each ticket's workflow (the same id: its status,
    control and outcome follow the new run). Its first segment resumes from what the remote
    holds; only a retry reuses the id of a workflow that finished."""
    started: dict[str, str] = {}
    for task in tasks:
        handle = await client.start_workflow(
            TicketWorkflow.run,
            task,
            id=workflow_id(key, task.ticket),
            task_queue=config.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        )
        started[task.ticket] = handle.result_run_id or ""
    return started


async def state_of(handle: WorkflowHandle[Any, Any]) -> tuple[bool, str]:
    """Whether the ticket's latest run lives, and its state (the memo's, as status lists it)."""
    described = await handle.describe()
    memo = await described.memo_value(MEMO, default={})
    live = described.status == WorkflowExecutionStatus.RUNNING
    if described.status == WorkflowExecutionStatus.CANCELED:
        return live, "stopped"
    if described.status in ENDED_FAILED:  # its memo may still say what it was doing
        return live, "failed"
    return live, str(memo.get("state", "queued" if live else "failed"))


async def _settle(handle: WorkflowHandle[Any, Any], wanted: str, wait: float) -> str:
    """The ticket's state once it is ``wanted`` or ``wait`` seconds passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while True:
        _, state = await state_of(handle)
        if state == wanted or loop.time() >= deadline:
            return state
        await asyncio.sleep(0.2)

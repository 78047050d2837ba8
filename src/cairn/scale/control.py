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
from cairn.errors import BadInput, NotApplicable, UnknownTicket
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


async def act(
    client: Client, key: str, action: str, tickets: list[str], wait: float, by: str = "cli"
) -> list[Done]:
    """Apply ``action`` to each ticket, as ``by`` asked (noted in its workflow first:
    ``TicketWorkflow.asked``); every ticket must have a workflow (checked first, so a typo
    changes nothing)."""
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
        await handle.signal(TicketWorkflow.asked, args=[action, by])
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
        missing = "so there is nothing to retry; cairn fleet start starts it"
        live, state = await _known_state(handle, ticket, missing)
        why = refusal("retry", ticket, live, state)
        if why is not None:
            raise NotApplicable(why)
        found[ticket] = state
    return found


def refusal(action: str, ticket: str, live: bool, state: str) -> str | None:
    """Why ``action`` does not apply to a ticket whose workflow is ``live`` (or ended) in
    ``state``; None when it does, or changes nothing (pause a paused ticket). A retry restarts
    an ended ticket only; pause, resume and stop act on a live one."""
    if action == "retry":
        if live:
            return (
                f"ticket {ticket} is {state}, not ended, so there is nothing to retry; cairn "
                f"fleet stop {ticket} first to restart it"
            )
        if state == "completed":
            return (
                f"ticket {ticket} is completed, so there is nothing to retry; to run its plan "
                "again, give it a new ticket id"
            )
        if state == "needs_review":
            return (
                f"ticket {ticket} needs review (its run finished), so there is nothing to retry; "
                f"review its branch cairn/{ticket}"
            )
        return None
    if live:
        return None
    later = "cairn fleet start starts it again" if state == "stopped" else None
    later = later or (
        f"cairn fleet retry {ticket} runs it again"
        if state not in ("completed", "needs_review")
        else "give its plan a new ticket id to run it again"
    )
    ended = f"ticket {ticket} is {state} (its workflow has ended)"
    return f"{ended}, so there is nothing to {action}; {later}"


def why_not(action: str, ticket: str, live: bool, state: str) -> str | None:
    """None when ``action`` changes the ticket, else why it does not (the refusal, or that it
    is where the action would take it): the dashboard's buttons, as ``control.why_not`` on the
    embedded engine."""
    why = refusal(action, ticket, live, state)
    if why is not None:
        return why
    if action == "pause" and state == "paused":
        return f"ticket {ticket} is paused already"
    if action == "resume" and state != "paused":
        return f"ticket {ticket} is {state}, not paused: it runs"
    return None


def row_actions(row: dict[str, Any]) -> dict[str, str | None]:
    """``why_not`` of each action for a row of the listing (a live workflow has no
    ``closed_at``)."""
    ticket, state = str(row["ticket"]), str(row["state"])
    live = row.get("closed_at") is None
    return {a: why_not(a, ticket, live, state) for a in (*ACTIONS, "retry")}


async def ask(client: Client, key: str, ticket: str, action: str, by: str) -> tuple[bool, str]:
    """Ask ``action`` of one live ticket for the dashboard, its asker noted in the workflow
    first (``TicketWorkflow.asked``): whether it changed anything, and the ticket's state.
    Raises ``UnknownTicket`` or ``NotApplicable``, nothing changed."""
    handle = client.get_workflow_handle(workflow_id(key, ticket))
    missing = "on this task queue's namespace; cairn fleet status lists the tickets"
    live, state = await _known_state(handle, ticket, missing)
    why = refusal(action, ticket, live, state)
    if why is not None:
        raise NotApplicable(why)
    (done,) = await act(client, key, action, [ticket], 0.0, by)
    return done.changed, done.state


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


async def _known_state(
    handle: WorkflowHandle[Any, Any], ticket: str, missing: str
) -> tuple[bool, str]:
    """``state_of`` the ticket's workflow; ``UnknownTicket`` (``… has no workflow, <missing>``)
    when it has none."""
    try:
        return await state_of(handle)
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        raise UnknownTicket(f"ticket {ticket} has no workflow {missing}") from None


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

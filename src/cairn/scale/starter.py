"""``cairn fleet start`` with ``engine = "temporal"``: one workflow per ticket, its id derived
from the repository and the ticket, so starting twice never duplicates a ticket."""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import CancelledError, WorkflowAlreadyStartedError

from cairn.config import TemporalConfig
from cairn.scale.messages import TicketInput, workflow_id
from cairn.scale.workflow import TicketWorkflow


@dataclass
class Started:
    ticket: str
    workflow_id: str
    new: bool  # False: the ticket's workflow runs, or finished (a stopped one starts again)


async def start(
    client: Client, config: TemporalConfig, tickets: list[TicketInput]
) -> list[Started]:
    started: list[Started] = []
    for task in tickets:
        wid = workflow_id(task.remote, task.ticket)
        try:
            await client.start_workflow(
                TicketWorkflow.run,
                task,
                id=wid,
                task_queue=config.task_queue,
                # a stopped (cancelled) ticket may start again; a finished one never
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
            )
            started.append(Started(task.ticket, wid, True))
        except WorkflowAlreadyStartedError:
            started.append(Started(task.ticket, wid, False))
    return started


async def outcomes(client: Client, ids: dict[str, str]) -> dict[str, str]:
    """ticket → final state, waiting for each workflow to end (a stopped ticket's workflow
    ends cancelled: ``stopped``)."""
    found: dict[str, str] = {}
    for ticket, wid in ids.items():
        handle: WorkflowHandle[TicketWorkflow, str] = client.get_workflow_handle_for(
            TicketWorkflow.run, wid
        )
        try:
            found[ticket] = await handle.result()
        except WorkflowFailureError as exc:
            found[ticket] = "stopped" if isinstance(exc.cause, CancelledError) else "failed"
    return found


def exit_code(states: dict[str, str]) -> int:
    """The embedded fleet's ``--once`` codes: 0 all completed, 3 any interrupted or stopped
    (resumable), else 1."""
    if any(s in ("interrupted", "stopped") for s in states.values()):
        return 3
    return 0 if all(s == "completed" for s in states.values()) else 1

"""``cairn fleet start`` with ``engine = "temporal"``: one workflow per ticket, its id derived
from the repository and the ticket, so starting twice never duplicates a ticket."""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from cairn.config import TemporalConfig
from cairn.scale.messages import TicketInput, workflow_id
from cairn.scale.workflow import TicketWorkflow


@dataclass
class Started:
    ticket: str
    workflow_id: str
    new: bool  # False: the ticket's workflow existed already (running or finished)


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
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
            started.append(Started(task.ticket, wid, True))
        except WorkflowAlreadyStartedError:
            started.append(Started(task.ticket, wid, False))
    return started


async def outcomes(client: Client, ids: dict[str, str]) -> dict[str, str]:
    """ticket → final state, waiting for each workflow to end."""
    found: dict[str, str] = {}
    for ticket, wid in ids.items():
        handle: WorkflowHandle[TicketWorkflow, str] = client.get_workflow_handle_for(
            TicketWorkflow.run, wid
        )
        found[ticket] = await handle.result()
    return found


def exit_code(states: dict[str, str]) -> int:
    """The embedded fleet's ``--once`` codes: 0 all completed, 3 any interrupted, else 1."""
    if any(s == "interrupted" for s in states.values()):
        return 3
    return 0 if all(s == "completed" for s in states.values()) else 1

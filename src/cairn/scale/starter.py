"""``cairn fleet start`` with ``engine = "temporal"``: one workflow per ticket, its id derived
from the repository and the ticket, so starting twice never duplicates a ticket."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import CancelledError, WorkflowAlreadyStartedError
from temporalio.service import RPCError

from cairn.config.records import Config, TemporalConfig
from cairn.fleet.refusals import EVENT, Reporter
from cairn.fleet.trackers.base import Candidate, Tracker
from cairn.scale.connection import Outage, connect, transient
from cairn.scale.control import state_of
from cairn.scale.messages import TicketInput, workflow_id
from cairn.scale.workflow import TicketWorkflow
from cairn.terms import RETRYABLE_STATES
from cairn.util.durations import parse_duration


@dataclass
class Started:
    ticket: str
    workflow_id: str
    new: bool  # False: the ticket's workflow runs, or finished (a stopped one starts again)
    ended: str | None = None  # how it finished when it did and may be retried


async def ended_as(handle: WorkflowHandle[Any, Any]) -> str | None:
    """The final state of the ticket's latest run when ``cairn fleet retry`` may restart it."""
    live, state = await state_of(handle)
    return state if not live and state in RETRYABLE_STATES else None


async def start(
    client: Client, config: TemporalConfig, tickets: list[TicketInput], key: str
) -> list[Started]:
    """Start each ticket's workflow (``key``: the repository's, ``remote.fleet_key``)."""
    started: list[Started] = []
    for task in tickets:
        wid = workflow_id(key, task.ticket)
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
            state = await ended_as(client.get_workflow_handle(wid))
            started.append(Started(task.ticket, wid, False, state))
    return started


async def outcomes(client: Client, ids: dict[str, str], outage: Outage) -> dict[str, str]:
    """ticket → final state, waiting for each workflow to end (a stopped ticket's workflow
    ends cancelled: ``stopped``). A Temporal that goes away meanwhile is waited for."""
    found: dict[str, str] = {}
    for ticket, wid in ids.items():
        handle: WorkflowHandle[TicketWorkflow, str] = client.get_workflow_handle_for(
            TicketWorkflow.run, wid
        )
        while ticket not in found:
            try:
                found[ticket] = await handle.result()
            except WorkflowFailureError as exc:
                found[ticket] = "stopped" if isinstance(exc.cause, CancelledError) else "failed"
            except RPCError as exc:
                if not transient(exc):
                    raise
                await outage.wait(exc)
                continue
            outage.over()
    return found


def exit_code(states: dict[str, str], refused: int = 0) -> int:
    """The embedded fleet's ``--once`` codes: 3 any interrupted or stopped (resumable), 1 any
    other end but completed; with every ticket completed, 1 if the queue also held ``refused``
    entries, 2 if it held nothing else, else 0 (``cairn.fleet.intake.Intake.settle``)."""
    if any(s in ("interrupted", "stopped") for s in states.values()):
        return 3
    if not all(s == "completed" for s in states.values()):
        return 1
    if refused:
        return 1 if states else 2
    return 0


Emit = Callable[..., None]  # (kind, text, **fields): one event of `cairn fleet start`


def ticket_input(config: Config, candidate: Candidate, remote: str, base: str) -> TicketInput:
    """A ticket's workflow input: its plan read from the queue now."""
    return TicketInput(
        ticket=candidate.ticket,
        plan_name=candidate.plan.name,
        plan=candidate.plan.read_text(),
        remote=remote,
        base=base,
        max_segments=config.fleet.max_attempts,
        heartbeat_seconds=parse_duration(config.temporal.heartbeat_timeout),
        max_attempts=config.fleet.max_attempts,
        max_backoff_seconds=parse_duration(config.temporal.max_backoff),
    )


async def drive(
    config: Config,
    tracker: Tracker,
    remote: str,
    base: str,
    key: str,
    once: bool,
    emit: Emit,
    reporter: Reporter,
) -> int:
    """Start a workflow per ticket the tracker lists; with ``once`` wait for them, else poll.
    Each entry the tracker refused is said once per change, and kept (``reporter``)."""
    client = await connect(config.temporal)
    ids: dict[str, str] = {}
    outage = Outage(config.temporal.address, emit)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    while True:
        tickets = [
            ticket_input(config, c, remote, base)
            for c in tracker.candidates()
            if c.ticket not in ids
        ]
        for message in tracker.said():
            emit("ticket_warning", "{message}", ticket=None, message=message)
        for refused in reporter.poll(tracker.rejected):
            emit(
                EVENT,
                "refused: {reason}",
                ticket=refused.ticket,
                plan=refused.plan,
                reason=refused.reason,
            )
        reporter.save()
        while True:  # a Temporal restarting between polls is waited for
            try:
                got_all = await start(client, config.temporal, tickets, key)
            except RPCError as exc:
                if not transient(exc):
                    raise
                await outage.wait(exc)
                continue
            outage.over()
            break
        for got in got_all:
            ids[got.ticket] = got.workflow_id
            kind, text = (
                ("ticket_started", "{ticket}: workflow {workflow_id} started")
                if got.new
                else ("ticket_exists", "{ticket}: workflow {workflow_id} exists already")
            )
            if got.ended is not None:
                text += " ({ended}: cairn fleet retry {ticket})"
            emit(kind, text, ticket=got.ticket, workflow_id=got.workflow_id, ended=got.ended)
        if once:
            break
        try:
            await asyncio.wait_for(stopping.wait(), parse_duration(config.fleet.poll_interval))
            return 3
        except TimeoutError:
            continue
    states = await outcomes(client, ids, outage)
    for ticket, state in states.items():
        emit("ticket_finished", "{ticket}: {state}", ticket=ticket, state=state)
    code = exit_code(states, len(reporter.current))
    emit(
        "fleet_finished",
        "fleet: exit {exit_code}",
        exit_code=code,
        tickets=states,
        refused=len(reporter.current),
    )
    return code

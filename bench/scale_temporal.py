"""What the scale bench reads of Temporal: every ticket workflow on the bench's own dev server
(it holds no other), each ticket's state, its history's length over all its runs
(continue-as-new), and each segment's ``ActivityTaskStarted`` event: the attempt that ran to
the end (its retries are not in the history) and when that attempt started."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

QUERY = "WorkflowType = 'cairn_ticket'"
ENDED = {"COMPLETED", "FAILED", "CANCELED", "TERMINATED", "TIMED_OUT"}
SCHEDULED, STARTED = 1, 2  # PENDING_ACTIVITY_STATE_…


@dataclass
class Segment:
    scheduled: float  # time.time() of ActivityTaskScheduled
    started: float  # of the ActivityTaskStarted that ran to the end (its attempt's start)
    attempt: int


@dataclass
class Ticket:
    ticket: str
    workflow_id: str
    status: str  # RUNNING, COMPLETED, … of the latest run
    state: str  # cairn's state: the memo's (queued, running, completed, failed, …)
    closed_at: float | None  # time.time() the latest run closed
    events: int = 0  # history events over all its runs
    segments: list[Segment] = field(default_factory=list)
    pending: int = 0  # the attempt of its segment running or waiting for a retry (open only)
    last_failure: str = ""  # that segment's last attempt's failure
    detail: str = ""  # the memo's detail: an ended ticket's last line
    current: float | None = None  # when the attempt running now started (open only)
    waits: bool = False  # its segment waits in the task queue (scheduled, not started)

    @property
    def ended(self) -> bool:
        return self.status in ENDED


async def _tickets(address: str, histories: bool) -> dict[str, Ticket]:
    from temporalio.client import Client

    client = await Client.connect(address)
    found: dict[str, Ticket] = {}
    runs: dict[str, list[str]] = {}
    async for wf in client.list_workflows(QUERY):
        runs.setdefault(wf.id, []).append(wf.run_id)
        if wf.status is not None and wf.status.name == "CONTINUED_AS_NEW":
            continue
        memo = (await wf.memo()).get("cairn") or {}
        status = wf.status.name if wf.status is not None else "UNKNOWN"
        state = str(memo.get("state") or "queued")
        if status in ENDED and status != "COMPLETED":
            state = "stopped" if status == "CANCELED" else "failed"
        ticket = str(memo.get("ticket") or wf.id)
        closed = wf.close_time.timestamp() if wf.close_time else None
        found[ticket] = Ticket(ticket, wf.id, status, state, closed)
        found[ticket].detail = str(memo.get("detail") or "")[:300]
    if histories:
        for one in found.values():
            for run_id in runs.get(one.workflow_id, []):
                await _history(client, one, run_id)
            one.segments.sort(key=lambda s: s.scheduled)
            if not one.ended:
                described = await client.get_workflow_handle(one.workflow_id).describe()
                for pending in described.raw_description.pending_activities:
                    one.pending = pending.attempt
                    one.last_failure = pending.last_failure.message[:300]
                    one.waits = pending.state == SCHEDULED
                    if pending.state == STARTED and pending.HasField("last_started_time"):
                        one.current = pending.last_started_time.ToDatetime().timestamp()
    return found


async def _history(client: Any, one: Ticket, run_id: str) -> None:
    history = await client.get_workflow_handle(one.workflow_id, run_id=run_id).fetch_history()
    scheduled: dict[int, float] = {}
    for event in history.events:
        one.events += 1
        at = event.event_time.ToDatetime().timestamp()
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled[event.event_id] = at
        elif event.HasField("activity_task_started_event_attributes"):
            attrs = event.activity_task_started_event_attributes
            first = scheduled.get(attrs.scheduled_event_id, at)
            one.segments.append(Segment(first, at, attrs.attempt))


def tickets(address: str, histories: bool = False) -> dict[str, Ticket]:
    """ticket → its workflow on the server at ``address`` (with ``histories``: events and
    segments, one history fetch per run)."""
    return asyncio.run(_tickets(address, histories))


def wait_ended(
    address: str,
    count: int,
    deadline: float,
    every: float = 2.0,
    still: Callable[[], bool] = lambda: True,
) -> dict[str, Ticket]:
    """Poll until ``count`` ticket workflows exist and every one has ended, ``deadline``
    (time.monotonic()) passes, or ``still()`` turns False; the last listing."""
    found: dict[str, Ticket] = {}
    while True:
        try:
            found = tickets(address)
        except Exception:  # the server restarting: look again
            found = found or {}
        else:
            if len(found) >= count and all(t.ended for t in found.values()):
                return found
        if time.monotonic() > deadline or not still():
            return found
        time.sleep(every)


def percentile(values: list[float], p: float) -> float | None:
    """The ``p``-th percentile (nearest rank) of ``values``; None without any."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(p / 100 * len(ordered))))
    return ordered[rank - 1]


async def _running(address: str) -> tuple[int, int]:
    from temporalio.client import Client

    client = await Client.connect(address)
    total = (await client.count_workflows(QUERY)).count
    open_ = (await client.count_workflows(f"{QUERY} AND ExecutionStatus = 'Running'")).count
    return total, open_


def running(address: str) -> tuple[int, int] | None:
    """(ticket workflows, of them still running) on the server; None when it does not answer.
    A continued-as-new run counts once more in the first figure."""
    try:
        return asyncio.run(_running(address))
    except Exception:
        return None


def restart(server: Any, down: float, tries: int = 3) -> Any:
    """The dev server ``server`` (``tests/scale/temporal_server.DevServer``) stopped (SIGTERM)
    and started again ``down`` seconds later with the same command line: its ports, its
    database file (its workflows kept). Returns the new ``DevServer``."""
    import subprocess

    import temporal_server

    command = Path(f"/proc/{server.process.pid}/cmdline").read_bytes().split(b"\0")[:-1]
    server.stop()
    time.sleep(down)
    for attempt in range(1, tries + 1):
        with server.log.open("ab") as out:
            process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        again = temporal_server.DevServer(server.address, process, server.log)
        try:
            asyncio.run(temporal_server._wait_ready(again))
            time.sleep(temporal_server.SETTLE)  # an internal port taken: it panics just after
            if process.poll() is None:
                return again
        except Exception:
            again.stop()
            if attempt == tries:
                raise
        time.sleep(1.0)
    raise RuntimeError(f"the dev server did not start again {tries} times; see {server.log}")

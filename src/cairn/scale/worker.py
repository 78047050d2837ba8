"""``cairn worker``: a Temporal worker that runs ticket workflows and their segments, in its
workspace root, until SIGINT or SIGTERM (which stop its runs with a snapshot first)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

from temporalio.worker import Worker

from cairn.config.records import TemporalConfig
from cairn.scale.connection import connect
from cairn.scale.segment import Segments
from cairn.scale.workflow import TicketWorkflow
from cairn.util.durations import parse_duration


async def serve(
    config: TemporalConfig,
    root: Path,
    concurrency: int,
    ready: Callable[[], None] = lambda: None,
) -> None:
    client = await connect(config)
    loop = asyncio.get_running_loop()
    # each slot's blocking work, its cleanup, and a cancelled attempt's thread until it stops
    loop.set_default_executor(ThreadPoolExecutor(max_workers=3 * concurrency + 2))
    jitter = parse_duration(config.retry_jitter)
    stall = parse_duration(config.work_timeout)
    segments = Segments(root, jitter=jitter, rebuilds=config.rebuilds, stall=stall)
    worker = Worker(
        client,
        task_queue=config.task_queue,
        workflows=[TicketWorkflow],
        activities=[segments.run_segment],
        max_concurrent_activities=concurrency,
        # a segment lasts as long as its agent: on shutdown it is cancelled at once, and stops
        # its run with a snapshot pushed (at most STOP_GRACE) so another worker continues it
        graceful_shutdown_timeout=timedelta(0),
    )
    stopping = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    async with worker:
        ready()
        await stopping.wait()

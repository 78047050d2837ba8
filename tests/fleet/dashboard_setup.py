"""Helpers shared by the tests in tests/fleet/ (not a test module)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from cairn.fleet import fleetstate
from cairn.fleet.fleetstate import FleetTicket
from cairn.state.layout import discover
from cairn.util import clock

LOCAL = "http://127.0.0.1"


def put_record(
    repo: Path, ticket: str, state: str, updated: datetime | None = None, **fields: Any
) -> None:
    _, _, layout = discover(repo)
    record = FleetTicket(
        ticket=ticket,
        plan=f"cairn-queue/{ticket}.md",
        state=state,  # type: ignore[arg-type]
        updated=updated or clock.now(),
        **fields,
    )
    fleetstate.write(layout, record)


def serve(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cairn", "fleet", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def started_url(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    for line in proc.stdout:
        event = json.loads(line)
        if event.get("event") == "dashboard_started":
            url: str = event["url"]
            return url
    raise AssertionError(proc.stderr.read() if proc.stderr else "no dashboard_started")

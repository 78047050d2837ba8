"""The linear tracker's effects happen once: a supervisor killed at a crash point (``cairn.faults``)
between an effect on Linear and its record as sent, then started again, leaves each comment,
state move and link on the fake Linear once (as tests/fleet/test_effects.py does for GitHub)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.fleet import fleetstate
from cairn.state.layout import discover
from cairn.terms import CRASH_POINTS, ENV_CRASH_AT, ENV_FAULT_INJECTION
from fleet.fake_linear import KEY, FakeLinear, serve
from fleet.linear_setup import BRANCH_URL, project

ONE_TASK = "## Task 1: Only step\n\nDo it.\n"


@pytest.fixture
def linear() -> Iterator[FakeLinear]:
    fake = FakeLinear()
    fake.add_team("IDE", "Ide")
    yield from serve(fake)
    assert fake.invalid == []


def supervise(repo: Path, logs: Path, crash: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLEET_AGENT_DIR": str(logs), "LINEAR_API_KEY": KEY}
    if crash is not None:
        env |= {ENV_FAULT_INJECTION: "1", ENV_CRASH_AT: crash}
    return subprocess.run(
        [sys.executable, "-m", "cairn", "fleet", "start", "--once", "--json"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


@pytest.mark.parametrize(
    ("point", "nth"),
    [
        ("fleet.state", 1),  # moved to In Progress, not recorded: set again, the same
        ("fleet.comment", 1),  # posted, not recorded: found by its key, adopted
        ("fleet.comment", 2),
        ("fleet.link", 1),  # attached, not recorded: attached again, the same one
        ("fleet.state", 2),  # moved to Done, not recorded
        ("fleet.sending", 2),  # marked sending, not sent: looked for, then sent
    ],
    ids=lambda v: str(v),
)
def test_killed_at_a_crash_point_linear_hears_each_thing_once(
    tmp_path: Path, linear: FakeLinear, point: str, nth: int
) -> None:
    assert point in CRASH_POINTS
    repo = project(tmp_path, linear)
    linear.add_issue("IDE-1", "Do the one step", ONE_TASK)
    logs = tmp_path / "agent-log"
    logs.mkdir()

    killed = supervise(repo, logs, f"{point}@{nth}")
    assert killed.returncode == -signal.SIGKILL, (killed.stdout, killed.stderr)
    again = supervise(repo, logs)
    assert again.returncode == 0, (again.stdout, again.stderr)
    assert "Traceback" not in again.stderr, again.stderr
    _, _, layout = discover(repo)
    record = fleetstate.read(layout, "IDE-1")
    assert record is not None and record.state == "completed"
    assert record.told == fleetstate.key_of(record)

    assert linear.keys_on("IDE-1") == [
        "cairn:IDE-1:1:running:comment",
        "cairn:IDE-1:1:completed:comment",
    ]
    assert linear.links_on("IDE-1") == [
        (BRANCH_URL.format(branch="cairn/IDE-1"), "Do the one step")
    ]
    assert linear.state_of("IDE-1") == "Done"
    assert sorted((repo / ".git/cairn/fleet/outbox").rglob("*.json")) == []

"""``/cairn`` commands in a Linear issue's comments, against the fake Linear GraphQL server: a
person of the workspace answers a ticket that stopped for input and its run resumes with the
answer; each command is answered once; an old one is never replayed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.fleet import fleetstate
from cairn.state.layout import discover
from fleet.fake_linear import KEY, FakeLinear, serve
from fleet.fleet_setup import TWO_TASKS
from fleet.linear_setup import project
from helpers import git

ENDPOINT = "https://api.example.test/v2"


@pytest.fixture
def linear() -> Iterator[FakeLinear]:
    fake = FakeLinear()
    fake.add_team("IDE", "Ide")
    yield from serve(fake)
    assert fake.invalid == []  # every query the tracker sent is one Linear's schema takes


def once(repo: Path, env: dict[str, str]) -> tuple[int, list[dict[str, Any]]]:
    done = subprocess.run(
        [sys.executable, "-m", "cairn", "fleet", "start", "--once", "--json"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]


def test_an_answer_in_a_linear_comment_resumes_the_run_once(
    tmp_path: Path, linear: FakeLinear
) -> None:
    repo = project(tmp_path, linear)
    toml = repo / "cairn.toml"
    toml.write_text(toml.read_text().replace("max_continuations = 0", "max_continuations = 3"))
    git(repo, "commit", "-qam", "continuations")
    logs = tmp_path / "agent-log"
    logs.mkdir()
    env = {**os.environ, "FLEET_AGENT_DIR": str(logs), "FLEET_AGENT_ASK": "IDE-1"}
    env["LINEAR_API_KEY"] = KEY
    linear.add_issue("IDE-1", "Call the endpoint", TWO_TASKS)
    linear.say("IDE-1", "/cairn retry")  # before the ticket ran: never carried out
    code, lines = once(repo, env)
    assert code == 1, lines
    _, _, layout = discover(repo)
    assert fleetstate.read(layout, "IDE-1").state == "needs_input"  # type: ignore[union-attr]
    assert not [e for e in lines if e["event"] == "ticket_command"]

    linear.say("IDE-1", f"/cairn answer {ENDPOINT}", name="Ana")
    code, lines = once(repo, env)
    assert code == 0, [e for e in lines if e["event"] in ("ticket_command", "ticket_warning")]
    assert fleetstate.read(layout, "IDE-1").state == "completed"  # type: ignore[union-attr]
    [said] = [e["said"] for e in lines if e["event"] == "ticket_command"]
    assert said == "@Ana: answered; the run of IDE-1 resumes with your answer."
    log = [json.loads(x) for x in (logs / "IDE-1.jsonl").read_text().splitlines()]
    assert next(e["answer"] for e in log if e["event"] == "answered") == ENDPOINT
    assert [e["task"] for e in log if e["event"] == "start"] == [1, 2]
    keys = [k for k in linear.keys_on("IDE-1") if k != "-"]
    assert len(keys) == len(set(keys)) and sum(":cmd:" in k for k in keys) == 1
    assert linear.state_of("IDE-1") == "Done"

    code, lines = once(repo, env)  # nothing is carried out again
    assert not [e for e in lines if e["event"] == "ticket_command"]

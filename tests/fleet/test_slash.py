"""``/cairn`` commands in a GitHub issue's comments (``cairn.fleet.slash``), against the fake
GitHub server: a person answers a ticket that stopped for input and its run resumes with the
answer; someone without write access, or an unknown command, gets a reply and nothing else;
each comment is carried out and answered once; the dashboard's API answers the same way."""

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
from fleet.fake_github import TOKEN, FakeGitHub, serve
from fleet.fleet_setup import TWO_TASKS, project
from helpers import git

ENDPOINT = "https://api.example.test/v2"


@pytest.fixture
def github(tmp_path: Path) -> Iterator[FakeGitHub]:
    yield from serve(FakeGitHub(remote=tmp_path / "origin.git"))


def asking(tmp_path: Path, github: FakeGitHub) -> tuple[Path, dict[str, str]]:
    repo = project(tmp_path, github)
    toml = repo / "cairn.toml"
    toml.write_text(toml.read_text().replace("max_continuations = 0", "max_continuations = 3"))
    git(repo, "commit", "-qam", "continuations")
    logs = tmp_path / "agent-log"
    logs.mkdir()
    env = {**os.environ, "GITHUB_TOKEN": TOKEN, "FLEET_AGENT_DIR": str(logs)}
    return repo, env | {"FLEET_AGENT_ASK": "GH-1"}


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
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, lines


def state_of(repo: Path, ticket: str) -> str:
    _, _, layout = discover(repo)
    record = fleetstate.read(layout, ticket)
    assert record is not None
    return record.state


def test_an_answer_in_a_comment_resumes_the_run_and_each_command_is_answered_once(
    tmp_path: Path, github: FakeGitHub
) -> None:
    repo, env = asking(tmp_path, github)
    github.add_issue(1, "Call the endpoint", TWO_TASKS)
    code, _ = once(repo, env)
    assert code == 1 and state_of(repo, "GH-1") == "needs_input"

    github.say(1, "/cairn retry", login="mallory", association="NONE")
    github.say(1, "/cairn dance", login="ana")
    github.say(1, f"/cairn answer {ENDPOINT}\nuse the v2 path", login="ana")
    code, lines = once(repo, env)
    assert code == 0, lines
    assert state_of(repo, "GH-1") == "completed"
    said = {e["verb"]: e["said"] for e in lines if e["event"] == "ticket_command"}
    assert said["retry"].startswith("@mallory: only people who can write")
    assert said["dance"].startswith("@ana: `/cairn dance` is not a command")
    assert said["answer"] == "@ana: answered; the run of GH-1 resumes with your answer."

    # the agent read the answer (both lines) in its prompt and did both tasks once
    log = [json.loads(x) for x in (tmp_path / "agent-log/GH-1.jsonl").read_text().splitlines()]
    assert {"answered"} <= {e["event"] for e in log}
    assert next(e["answer"] for e in log if e["event"] == "answered") == ENDPOINT
    assert [e["task"] for e in log if e["event"] == "start"] == [1, 2]
    # a reply to each command, keyed by its comment; the resumed attempt's own comments
    keys = [k for k in github.keys_on(1) if k != "-"]  # cairn's comments (a person's have none)
    replies = [k for k in keys if ":cmd:" in k]
    assert len(replies) == 3 and len(set(replies)) == 3
    assert "cairn:GH-1:r1.1:running:comment" in keys
    assert "cairn:GH-1:r1.1:completed:comment" in keys
    assert len(keys) == len(set(keys))
    assert [p["head"] for p in github.pulls] == ["cairn/GH-1"]

    # a later supervisor carries out nothing again
    before = list(github.comments)
    code, lines = once(repo, env)
    assert not [e for e in lines if e["event"] == "ticket_command"]
    assert github.comments == before


def test_an_old_command_is_not_replayed_and_a_command_for_a_finished_ticket_is_refused(
    tmp_path: Path, github: FakeGitHub
) -> None:
    repo, env = asking(tmp_path, github)
    github.add_issue(1, "Call the endpoint", TWO_TASKS)
    github.say(1, "/cairn stop", login="ana")  # before the ticket ever ran: never carried out
    code, lines = once(repo, env)
    assert code == 1 and state_of(repo, "GH-1") == "needs_input"
    assert not [e for e in lines if e["event"] == "ticket_command"]
    github.say(1, "/cairn stop", login="ana")
    code, lines = once(repo, env)
    [told] = [e for e in lines if e["event"] == "ticket_command"]
    assert ("was not done" in told["said"] and "nothing to stop" in told["said"].lower()) or (
        "not done" in told["said"]
    )
    assert state_of(repo, "GH-1") == "needs_input"


def test_the_dashboard_api_answers_a_ticket_waiting_for_input(
    tmp_path: Path, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx2 as httpx

    from fleet.dashboard_server import app_for, serving

    repo, env = asking(tmp_path, github)
    github.add_issue(1, "Call the endpoint", TWO_TASKS)
    code, _ = once(repo, env)
    assert code == 1 and state_of(repo, "GH-1") == "needs_input"
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)  # the dashboard tells GitHub of what it changes
    with serving(app_for(repo)[0]) as base:
        url = f"{base}/api/v1/tickets/GH-1/answer"
        bad = httpx.post(url, json={"answer": "x"})
        assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid_answer")
        empty = httpx.post(url, json={"text": "  "})
        assert empty.status_code == 400 and "is empty" in empty.json()["error"]["message"]
        done = httpx.post(url, json={"text": ENDPOINT, "by": "ana"})
        assert done.status_code == 202, done.text
        assert (done.json()["action"], done.json()["changed"]) == ("retry", True)
        again = httpx.post(url, json={"text": "more"})
        assert again.status_code == 409  # retrying now: not waiting for input
    assert state_of(repo, "GH-1") == "retrying"
    code, _ = once(repo, env)  # the next supervisor resumes it, with the answer
    assert code == 0 and state_of(repo, "GH-1") == "completed"
    log = [json.loads(x) for x in (tmp_path / "agent-log/GH-1.jsonl").read_text().splitlines()]
    assert next(e["answer"] for e in log if e["event"] == "answered") == ENDPOINT


def test_parse_reads_the_first_line_and_keeps_the_rest_of_an_answer() -> None:
    from cairn.fleet.slash import parse

    assert parse("/cairn answer use v2\nand retry twice") == ("answer", "use v2\nand retry twice")
    assert parse("  /cairn RETRY  ") == ("retry", "")
    assert parse("/cairn stop\r\n") == ("stop", "")
    assert parse("/cairn dance now") == ("dance", "now")
    assert parse("please /cairn retry") is None
    assert parse("/cairnretry") is None
    assert parse("") is None


def test_a_restart_gives_the_same_state_a_new_key() -> None:
    from cairn.util import clock

    first = fleetstate.FleetTicket(
        ticket="GH-1", plan="p.md", state="running", attempt=1, updated=clock.now()
    )
    again = fleetstate.FleetTicket(
        ticket="GH-1", plan="p.md", state="running", attempt=1, restarts=1, updated=clock.now()
    )
    assert fleetstate.key_of(first) == "cairn:GH-1:1:running"
    assert fleetstate.key_of(again) == "cairn:GH-1:r1.1:running"


def test_a_first_read_counts_only_what_came_after_cairns_last_word(tmp_path: Path) -> None:
    from datetime import timedelta

    from cairn.fleet import slash
    from cairn.util import clock
    from helpers import make_repo

    repo = make_repo(tmp_path / "repo")
    _, _, layout = discover(repo)
    now = clock.now()
    record = fleetstate.FleetTicket(
        ticket="GH-1", plan="p.md", state="needs_input", attempt=1, updated=now
    )
    fleetstate.write(layout, record)
    later = (now + timedelta(seconds=5)).isoformat()
    comments = [
        slash.Said("1", "/cairn retry", "ana", True, later),  # before cairn's last word
        slash.Said(
            "2", "Needs input: …\n<!-- cairn:GH-1:1:needs_input:comment -->", "bot", False, later
        ),
        slash.Said("3", "/cairn answer yes", "ana", True, later),
    ]
    seen = slash.Seen(layout, "github")
    found = slash.read(layout, seen, lambda _ticket: comments, "GH-")
    assert [(c.verb, c.ref) for c in found] == [("answer", "3")]
    assert slash.read(layout, seen, lambda _ticket: comments, "GH-") == []  # each once
    comments.append(slash.Said("4", "/cairn stop", "ana", True, later))
    assert [c.ref for c in slash.read(layout, seen, lambda _ticket: comments, "GH-")] == ["4"]

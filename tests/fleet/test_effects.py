"""Every effect outside the repository happens once: killed at each named crash point
(``cairn.faults``) and started again, the fleet ends as it would have without the kill.

A real ``cairn fleet start --once`` against the fake GitHub server and a webhook receiver on
127.0.0.1, killed by ``CAIRN_CRASH_AT`` at one point of its ending sequences, then started again
without it: one pull request, each comment once (by the key hidden in it), no transition lost,
the labels right, the webhook's transition delivered (again, with its key, only when its
answer was the thing lost). The run's own ending points are killed under ``cairn run`` and
resumed. And a request whose answer is lost is looked for, not sent twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.fleet import fleetstate
from cairn.state import journal
from cairn.state.layout import discover
from cairn.terms import CRASH_POINTS, ENV_CRASH_AT, ENV_FAULT_INJECTION
from fleet.fake_github import FakeGitHub, Receiver, receive, serve
from fleet.fleet_setup import TWO_TASKS, project, queued, tracker_for
from helpers import cairn, git

ONE_TASK = "## Task 1: Only step\n\nDo it.\n"


@pytest.fixture
def github(tmp_path: Path) -> Iterator[FakeGitHub]:
    yield from serve(FakeGitHub(remote=tmp_path / "origin.git"))


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from receive(Receiver())


@pytest.fixture(autouse=True)
def token(monkeypatch: pytest.MonkeyPatch) -> None:
    from fleet.fake_github import TOKEN

    monkeypatch.delenv("GH_TOKEN", raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)


def supervise(repo: Path, logs: Path, crash: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLEET_AGENT_DIR": str(logs)}
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


def agent_log(logs: Path, ticket: str) -> list[dict[str, Any]]:
    path = logs / f"{ticket}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def outbox_left(repo: Path) -> list[Path]:
    return sorted((repo / ".git/cairn/fleet/outbox").rglob("*.json"))


# Each point once, at the completion's messages (``fleet.record`` at the start's too); every
# point at every occurrence is bench/chaos/fleet_kill.py's (docs/reliability.md).
CASES = [
    ("fleet.record", 1),  # running written, not told: told by the next supervisor
    ("fleet.record", 2),  # completed written, not told: pull request, comment, webhook after
    ("fleet.told", 2),
    ("fleet.sending", 3),  # marked sending, not sent: looked for, then sent
    ("fleet.comment", 2),  # posted, not recorded: found by its key, adopted
    ("fleet.labels", 2),
    ("fleet.push", 1),
    ("fleet.pull_request", 1),  # opened, not recorded: found by its branch, adopted
    ("fleet.notify", 1),  # delivered, not recorded: delivered again with the same key
]
QUICK = {("fleet.record", 2), ("fleet.comment", 2), ("fleet.pull_request", 1)}


@pytest.mark.parametrize(
    ("point", "nth"),
    [
        pytest.param(p, n, marks=() if (p, n) in QUICK else pytest.mark.slow, id=f"{p}@{n}")
        for p, n in CASES
    ],
)
def test_killed_at_a_crash_point_the_effects_happen_once(
    tmp_path: Path, github: FakeGitHub, receiver: Receiver, point: str, nth: int
) -> None:
    assert point in CRASH_POINTS
    repo = project(tmp_path, github, notify=[receiver.url])
    github.add_issue(1, "Do the one step", ONE_TASK)
    logs = tmp_path / "agent-log"
    logs.mkdir()

    killed = supervise(repo, logs, f"{point}@{nth}")
    assert killed.returncode == -signal.SIGKILL, (killed.stdout, killed.stderr)
    again = supervise(repo, logs)
    assert again.returncode == 0, (again.stdout, again.stderr)
    assert "Traceback" not in again.stderr, again.stderr
    _, _, layout = discover(repo)
    record = fleetstate.read(layout, "GH-1")
    assert record is not None and record.state == "completed"

    # every transition reached GitHub once: its comment's key once, none without a key
    assert github.keys_on(1) == ["cairn:GH-1:1:running:comment", "cairn:GH-1:1:completed:comment"]
    assert github.labels(1) == ["cairn", "cairn:done"]
    assert [p["head"] for p in github.pulls] == ["cairn/GH-1"]
    assert [p["title"] for p in github.pulls] == ["Do the one step"]  # the issue's, told late too
    assert [s.status for s in github.requests("POST", "/pulls")] == [201]  # never opened twice
    origin = tmp_path / "origin.git"
    assert git(origin, "rev-parse", "cairn/GH-1") == git(repo, "rev-parse", "cairn/GH-1")
    # the webhook: its transition's key; a second delivery, same key, only when the kill
    # came after a delivery and before it was recorded (a webhook cannot be asked whether it
    # got it): always at fleet.notify, and at a tracker point that raced the webhook's thread
    assert set(receiver.keys) == {"cairn:GH-1:1:completed"}
    assert len(receiver.keys) == 2 if point == "fleet.notify" else len(receiver.keys) in (1, 2)
    # the one task was done once, and nothing waits to be told
    assert [e["task"] for e in agent_log(logs, "GH-1") if e["event"] == "start"] == [1]
    assert outbox_left(repo) == []
    record = fleetstate.read(layout, "GH-1")
    assert record is not None and record.told == fleetstate.key_of(record)
    shown = cairn("fleet", "status", "--json", cwd=repo)
    [row] = json.loads(shown.stdout)
    assert "outbox" not in row  # nothing waits to be told


@pytest.mark.parametrize("point", ["run.snapshot", "run.summary", "run.ended"])
def test_a_run_killed_in_its_ending_is_resumed_and_nothing_is_redone(
    tmp_path: Path, github: FakeGitHub, point: str
) -> None:
    repo = project(tmp_path, github)
    plan = tmp_path / "plan.md"
    plan.write_text(TWO_TASKS)
    logs = tmp_path / "agent-log"
    logs.mkdir()
    env = {"FLEET_AGENT_DIR": str(logs), ENV_FAULT_INJECTION: "1", ENV_CRASH_AT: point}
    killed = subprocess.run(
        [sys.executable, "-m", "cairn", "run", str(plan), "--ticket", "T-1"],
        cwd=repo,
        env={**os.environ, **env},
        capture_output=True,
        timeout=240,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed = cairn("resume", "T-1", cwd=repo, env={"FLEET_AGENT_DIR": str(logs)})
    if point == "run.ended":  # its end was journaled: finished, nothing to resume
        assert resumed.returncode == 2 and "finished; there is nothing to resume" in resumed.stderr
    else:
        assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    started = [e["task"] for e in agent_log(logs, "T-1") if e["event"] == "start"]
    assert started == [1, 2]  # each task once
    _, _, layout = discover(repo)
    run = layout.latest_run("T-1")
    assert run is not None
    events, _ = journal.read(layout.run_dir("T-1", run))
    ends = [e.get("status") for e in events if e.get("event") == "run_finished"]
    assert ends == ["completed"]
    done = [
        e.get("task") for e in events if e.get("event") == "task" and e.get("status") == "completed"
    ]
    assert done == [1, 2]


def test_a_lost_answer_is_looked_for_and_never_sent_twice(
    tmp_path: Path, github: FakeGitHub
) -> None:
    repo = project(tmp_path, github)
    github.add_issue(7, "Add login", TWO_TASKS)
    tracker, layout = tracker_for(repo)
    tracker.candidates()
    queued(layout, "GH-7", attempt=1)
    # the comment is posted and its answer lost: its outcome is unknown, so it is not posted
    # again in place; the next poll finds it by its key and adopts it
    github.lose_answer_once("POST", "/issues/7/comments")
    tracker.transition("GH-7", "running")
    assert len(github.requests("POST", "/issues/7/comments")) == 1
    [unsure] = [json.loads(p.read_text()) for p in outbox_left(repo)]
    assert unsure["sending"] and unsure["key"] == "cairn:GH-7:1:running:comment"
    shown = cairn("fleet", "status", "--json", cwd=repo)
    row = next(r for r in json.loads(shown.stdout) if r["ticket"] == "GH-7")
    assert row["outbox"] == {"pending": 1, "unknown": 1}
    text = cairn("fleet", "status", cwd=repo).stdout
    assert "not told yet (sent at the next poll):\n  GH-7: 1 message to send (1 unknown: " in text
    tracker.flush()
    assert len(github.requests("POST", "/issues/7/comments")) == 1
    assert github.keys_on(7) == ["cairn:GH-7:1:running:comment"]
    assert outbox_left(repo) == []
    assert any("had been posted; adopted" in w for w in tracker.said())
    # the same transition told again (a supervisor that died before it recorded telling it)
    # puts nothing: its key is in the ledger
    tracker.transition("GH-7", "running")
    assert outbox_left(repo) == [] and github.keys_on(7) == ["cairn:GH-7:1:running:comment"]


def test_a_pull_request_opened_with_its_answer_lost_is_adopted(
    tmp_path: Path, github: FakeGitHub
) -> None:
    repo = project(tmp_path, github)
    github.add_issue(7, "Add login", TWO_TASKS)
    tracker, layout = tracker_for(repo)
    tracker.candidates()
    git(repo, "branch", "cairn/GH-7")
    queued(layout, "GH-7", state_after="completed", attempt=1, branch="cairn/GH-7")
    github.lose_answer_once("POST", "/pulls")
    tracker.finish("GH-7", "completed")
    assert len(github.pulls) == 1 and outbox_left(repo) != []
    tracker.flush()
    assert len(github.pulls) == 1  # found by its branch, not opened again
    assert len(github.requests("POST", "/pulls")) == 1
    assert outbox_left(repo) == []
    assert github.keys_on(7) == ["cairn:GH-7:1:completed:comment"]


def test_crash_points_are_read_only_when_fault_injection_allows(
    tmp_path: Path, github: FakeGitHub
) -> None:
    repo = project(tmp_path, github)
    plan = tmp_path / "plan.md"
    plan.write_text(ONE_TASK)
    logs = tmp_path / "agent-log"
    logs.mkdir()
    done = cairn(
        "run",
        str(plan),
        "--ticket",
        "T-1",
        cwd=repo,
        env={"FLEET_AGENT_DIR": str(logs), ENV_CRASH_AT: "run.summary"},  # no injection flag
    )
    assert done.returncode == 0, done.stderr

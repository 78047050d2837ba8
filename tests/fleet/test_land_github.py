"""Landing on the ``github`` tracker (docs/fleet.md, "Landing a ticket"): ``cairn fleet land``
merges the ticket's pull request on the fake GitHub of tests/fleet/fake_github.py (``PUT
…/pulls/{n}/merge``, a real merge commit in the bare ``origin``); a pull request that no longer
merges (405) is a fix round whose agent merges ``origin/main``, and the running supervisor
merges the pull request once it passes."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cairn.fleet import fleetstate
from cairn.fleet.dashboard.app import make_app
from cairn.fleet.fleetstate import FleetTicket
from cairn.state.layout import discover
from cairn.util import clock
from fleet.dashboard_setup import LOCAL
from fleet.fake_github import TOKEN, FakeGitHub, serve
from fleet.fleet_setup import agent_env, project, record, supervisor, wait_line
from helpers import assert_one_line_error, cairn, git

ONE = "## Task 1: Step 1\n\nDo step 1.\n"


@pytest.fixture
def github(tmp_path: Path) -> Iterator[FakeGitHub]:
    yield from serve(FakeGitHub(remote=tmp_path / "origin.git"))


@pytest.fixture(autouse=True)
def token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GH_TOKEN", raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)


def test_a_land_merges_the_pull_request_and_a_conflict_after_its_fix_round(
    tmp_path: Path, github: FakeGitHub
) -> None:
    repo = project(tmp_path, github)
    origin = tmp_path / "origin.git"
    env = agent_env(tmp_path)
    github.add_issue(1, "One", ONE)
    github.add_issue(2, "Two", ONE)
    ran = cairn("fleet", "start", "--once", "--json", cwd=repo, env=env)
    assert ran.returncode == 0, (ran.stdout, ran.stderr)
    numbers = {p["head"]: p["number"] for p in github.pulls}
    assert sorted(numbers) == ["cairn/GH-1", "cairn/GH-2"]
    local_main = git(repo, "rev-parse", "main")

    unknown = cairn("fleet", "land", "GH-9", cwd=repo)
    assert_one_line_error(unknown)
    assert not github.requests("PUT")

    before = git(origin, "rev-parse", "main").strip()
    landed = cairn("fleet", "land", "GH-1", "--json", cwd=repo)
    assert landed.returncode == 0, (landed.stdout, landed.stderr)
    answer = json.loads(landed.stdout)
    assert (answer["landed"], answer["how"], answer["pull"]) == (
        True,
        "pull_request",
        numbers["cairn/GH-1"],
    )
    after = git(origin, "rev-parse", "main").strip()
    assert answer["merge"] == after
    tip = git(repo, "rev-parse", "cairn/GH-1").strip()
    assert git(origin, "rev-list", "--parents", "-n1", after).split()[1:] == [before, tip]
    (put,) = github.requests("PUT", f"/pulls/{numbers['cairn/GH-1']}/merge")
    assert put.body["sha"] == tip and put.body["merge_method"] == "merge"
    assert git(repo, "rev-parse", "main") == local_main  # the local base is not touched

    # origin's main moves on with a line in GH-2's file: its pull request no longer merges
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    (clone / "work").mkdir(exist_ok=True)
    (clone / "work/GH-2-task-1.txt").write_text("main's own line\n")
    git(clone, "add", "-A")
    git(clone, "-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qm", "main moves on")
    git(clone, "push", "-q", "origin", "main")
    moved = git(origin, "rev-parse", "main").strip()
    # a running supervisor carries the fix round out (a new one would not list an issue
    # labelled cairn:done again), then merges the pull request
    proc = supervisor(repo, env)
    watchdog = threading.Timer(180, os.killpg, (proc.pid, signal.SIGKILL))  # no endless wait
    watchdog.start()
    try:
        wait_line(proc, "fleet_budget")
        conflict = cairn("fleet", "land", "GH-2", "--json", cwd=repo)
        assert conflict.returncode == 1, (conflict.stdout, conflict.stderr)
        said = json.loads(conflict.stdout)
        assert said["landed"] is False and said["conflicts"] == ["work/GH-2-task-1.txt"]
        assert git(origin, "rev-parse", "main").strip() == moved
        land = wait_line(proc, "ticket_land")
    finally:
        watchdog.cancel()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=60)
    assert (land["landed"], land["how"], land["pull"]) == (
        True,
        "pull_request",
        numbers["cairn/GH-2"],
    )
    assert record(repo, "GH-2")["state"] == "completed"
    final = git(origin, "rev-parse", "main").strip()
    assert final == land["merge"]
    for kept in (moved, after, git(repo, "rev-parse", "cairn/GH-2").strip()):
        done = os.system(f"git -C {origin} merge-base --is-ancestor {kept} {final}")
        assert done == 0, kept
    text = git(origin, "show", f"{final}:work/GH-2-task-1.txt")
    assert text == "GH-2 task 1\nmain's own line\n"
    assert not (repo / ".git/cairn/fleet/landing/GH-2.json").exists()


def test_a_land_without_a_pull_request_to_merge_is_refused(
    tmp_path: Path, github: FakeGitHub
) -> None:
    repo = project(tmp_path, github)
    git(repo, "branch", "cairn/GH-5")
    _, _, layout = discover(repo)
    put = FleetTicket(
        ticket="GH-5", plan="GH-5.md", state="approved", branch="cairn/GH-5", updated=clock.now()
    )
    fleetstate.write(layout, put)
    client = TestClient(make_app(repo, token=None), base_url=LOCAL)
    answer = client.post("/api/v1/tickets/GH-5/land")
    assert answer.status_code == 409, answer.text
    assert answer.json()["error"]["code"] == "not_landable"
    assert "has no pull request from cairn/GH-5 yet" in answer.json()["error"]["message"]
    github.pulls.append({"head": "cairn/GH-5", "base": "main", "number": 7, "state": "open"})
    github.pulls[-1]["draft"] = True
    result = cairn("fleet", "land", "GH-5", cwd=repo)
    assert_one_line_error(result)
    assert "pull request #7 is a draft; mark it ready for review on GitHub" in result.stderr
    assert not github.requests("PUT")
    assert not (repo / ".git/cairn/tickets").exists()  # nothing journaled, no fix round

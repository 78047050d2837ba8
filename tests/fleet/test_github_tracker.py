"""The ``github`` tracker against a fake GitHub REST server on 127.0.0.1 (tests/fleet/
fake_github.py): issues in, comments and labels out, a pushed branch and a pull request, a 502
and rate limits answered mid-run, and an outbox that loses nothing across a restart. The last
test is the whole fleet: ``cairn fleet start --once`` with a bare repository as ``origin``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cairn.fleet import fleetstate
from cairn.fleet.trackers import Candidate
from cairn.util import clock
from fleet.fake_github import TOKEN, FakeGitHub, Receiver, receive, serve
from fleet.fleet_setup import TWO_TASKS, project, queued, tracker_for
from helpers import assert_one_line_error, cairn, git


@pytest.fixture
def github(tmp_path: Path) -> Iterator[FakeGitHub]:
    yield from serve(FakeGitHub(remote=tmp_path / "origin.git"))


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from receive(Receiver())


def outbox(repo: Path) -> list[dict[str, Any]]:
    directory = repo / ".git/cairn/fleet/outbox"
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]


@pytest.fixture(autouse=True)
def token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GH_TOKEN", raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)


def test_open_labelled_issues_become_tickets_whose_plan_is_the_body(
    tmp_path: Path, github: FakeGitHub
) -> None:
    repo = project(tmp_path, github)
    github.add_issue(1, "Add login", TWO_TASKS)
    github.add_issue(2, "Done before", TWO_TASKS, labels=("cairn", "cairn:done"))
    github.add_issue(3, "No plan", "   ")
    github.add_issue(4, "Not for cairn", TWO_TASKS, labels=("bug",))
    github.add_issue(5, "A pull request", TWO_TASKS)
    github.issues[5]["pull_request"] = {"url": "x"}
    github.add_issue(12, "Fix logout", "- [ ] log out\n")
    tracker, layout = tracker_for(repo)
    plans = repo / ".git/cairn/fleet/github/plans"
    assert tracker.candidates() == [
        Candidate("GH-1", plans / "GH-1.md"),
        Candidate("GH-12", plans / "GH-12.md"),
    ]
    assert (plans / "GH-1.md").read_text() == TWO_TASKS.replace("\r\n", "\n").strip() + "\n"
    assert [(r.ticket, r.plan, r.reason.split(";")[0]) for r in tracker.rejected] == [
        ("GH-3", "https://github.test/octo/app/issues/3", "issue #3 has no plan in its body")
    ]
    listed = github.requests("GET", "/issues")
    assert listed[0].query["labels"] == "cairn" and listed[0].query["state"] == "open"
    assert tracker.claim("GH-1") and not tracker.claim("GH-2")
    # an edit of the body reaches the plan until the ticket starts, not after
    github.issues[1]["body"] = "## Task 1: Only step\n"
    tracker.candidates()
    assert (plans / "GH-1.md").read_text() == "## Task 1: Only step\n"
    queued(layout, "GH-1", state_after="running")
    github.issues[1]["body"] = "## Task 1: Something else\n"
    tracker.candidates()
    assert (plans / "GH-1.md").read_text() == "## Task 1: Only step\n"


def test_a_502_and_rate_limits_mid_run_are_retried_and_nothing_is_lost(
    tmp_path: Path, github: FakeGitHub
) -> None:
    repo = project(tmp_path, github)
    github.add_issue(7, "Add login", TWO_TASKS)
    tracker, layout = tracker_for(repo)
    tracker.candidates()
    queued(layout, "GH-7", attempt=1)

    # a 429 (Retry-After: 1) on the labels is retried in place: GitHub did not act on it
    github.rate_limit_once("POST", "/issues/7/labels", retry_after=1)
    # a 502 on the comment is not: GitHub may have posted it. It stays in the outbox, its
    # outcome unknown
    github.fail_once("POST", "/issues/7/comments", 502)
    tracker.transition("GH-7", "running")
    assert [s.status for s in github.requests("POST", "/issues/7/labels")] == [429, 200]
    assert [s.status for s in github.requests("POST", "/issues/7/comments")] == [502]
    [unsure] = outbox(repo)
    assert unsure["kind"] == "comment" and unsure["sending"] and unsure["tries"] == 1
    # the next poll looks for it first (it is not there), then posts it, once
    tracker.flush()
    assert [s.status for s in github.requests("GET", "/issues/7/comments")] == [200]
    assert [s.status for s in github.requests("POST", "/issues/7/comments")] == [502, 201]
    assert github.labels(7) == ["cairn", "cairn:running"]
    assert github.comments_on(7) == ["Started attempt 1 of 2 on branch `cairn/GH-7`.\n\n— cairn"]
    assert github.keys_on(7) == ["cairn:GH-7:1:running:comment"]
    assert outbox(repo) == []

    # a primary rate limit (reset a minute away) is not slept through: the comment waits in
    # the outbox, the tracker calls nothing until the reset, then sends it
    github.rate_limit_once("POST", "/issues/7/comments", retry_after=None)
    record = fleetstate.read(layout, "GH-7")
    assert record is not None
    later = clock.now() + timedelta(seconds=30)
    fleetstate.write(
        layout, msgspec.structs.replace(record, state="retrying", next_attempt_at=later)
    )
    tracker.transition("GH-7", "retrying", "Interrupted — max_turns")
    assert [s.status for s in github.requests("POST", "/issues/7/comments")] == [502, 201, 403]
    [waiting] = outbox(repo)
    assert waiting["kind"] == "comment" and waiting["tries"] == 1
    assert "HTTP 403" in waiting["last_error"]
    asked = len(github.seen)
    tracker.candidates()
    assert len(github.seen) == asked  # held back until the reset: not even the listing
    tracker.blocked_until = 0  # the reset has come
    tracker.candidates()
    assert outbox(repo) == []
    said = github.comments_on(7)[-1]
    assert said.startswith("Interrupted: Interrupted — max_turns")
    assert "Attempt 2 of 2 starts at" in said

    # a 500 on a comment: the message stays on disk, in order, and the next supervisor's
    # tracker looks for it and sends it at its first poll
    github.fail_once("POST", "/issues/7/comments", 500)
    tracker.transition("GH-7", "interrupted", "stopped")
    kinds = [m["kind"] for m in outbox(repo)]
    assert kinds == ["comment"]  # the labels went; the comment waits
    assert github.labels(7) == ["cairn"]
    fresh, _ = tracker_for(repo)
    fresh.candidates()
    assert outbox(repo) == []
    assert github.comments_on(7)[-1].endswith(
        "The fleet was stopped; the next `cairn fleet start` resumes it.\n\n— cairn"
    )


def test_an_outage_keeps_a_tickets_messages_in_order(tmp_path: Path, github: FakeGitHub) -> None:
    repo = project(tmp_path, github)
    github.add_issue(3, "Ordered", TWO_TASKS)
    tracker, layout = tracker_for(repo)
    tracker.candidates()
    queued(layout, "GH-3", attempt=1)
    for _ in range(4):
        github.fail_once("POST", "/issues/3/labels", 503)
    tracker.transition("GH-3", "running")
    # the labels failed, so the comment after them waits too
    assert [m["kind"] for m in outbox(repo)] == ["labels", "comment"]
    assert github.comments_on(3) == []
    tracker.candidates()
    assert outbox(repo) == []
    posts = [s.path for s in github.requests("POST", "/issues/3/") if s.status < 300]
    assert posts == ["/repos/octo/app/issues/3/labels", "/repos/octo/app/issues/3/comments"]


def test_a_fix_round_and_an_approval_are_said_as_what_they_are(
    tmp_path: Path, github: FakeGitHub
) -> None:
    """A ticket sent back for a fix round is not "interrupted": the issue hears what was asked;
    an approval without a pull request to approve is said, not dropped in silence."""
    repo = project(tmp_path, github)
    github.add_issue(4, "Reviewed", TWO_TASKS)
    tracker, layout = tracker_for(repo)
    tracker.candidates()
    detail = "fix round 1 asked by ana: R1"
    queued(layout, "GH-4", "retrying", attempt=0, last_reason="fix_round", detail=detail)
    tracker.transition("GH-4", "retrying", detail)
    [said] = github.comments_on(4)
    assert said.startswith(f"A fix round was asked for ({detail}): the run of branch `cairn/GH-4`")
    assert "Interrupted" not in said
    queued(layout, "GH-4", "approved", detail="approved by ana at 1234567890")
    tracker.transition("GH-4", "approved", "approved by ana at 1234567890")
    assert github.reviews == []  # no pull request: nothing to approve there
    assert any("has no pull request to approve" in w for w in tracker.said())
    assert outbox(repo) == []


def test_a_done_issue_whose_ticket_waits_for_a_fix_round_is_a_candidate_again(
    tmp_path: Path, github: FakeGitHub
) -> None:
    """A fix round asked while no supervisor ran (its issue labelled ``cairn:done``): the next
    supervisor's first listing offers the ticket, so the round runs; a done issue without one is
    not offered."""
    repo = project(tmp_path, github)
    github.add_issue(6, "Reviewed later", TWO_TASKS)
    first, layout = tracker_for(repo)
    assert [c.ticket for c in first.candidates()] == ["GH-6"]  # its plan is kept
    github.issues[6]["labels"].append({"name": "cairn:done"})
    queued(layout, "GH-6", "completed", attempt=1)
    done, _ = tracker_for(repo)
    assert done.candidates() == []
    queued(layout, "GH-6", "retrying", attempt=0, last_reason="fix_round")
    later, _ = tracker_for(repo)
    assert [c.ticket for c in later.candidates()] == ["GH-6"]
    assert later.claim("GH-6")


def test_without_a_token_fleet_start_is_refused(tmp_path: Path, github: FakeGitHub) -> None:
    repo = project(tmp_path, github)
    result = cairn("fleet", "start", "--once", cwd=repo, env={"GITHUB_TOKEN": "", "GH_TOKEN": ""})
    assert_one_line_error(result)
    assert "set GITHUB_TOKEN or GH_TOKEN" in result.stderr
    assert github.seen == []


def test_fleet_start_once_pushes_the_branch_and_opens_the_pull_request(
    tmp_path: Path, github: FakeGitHub, receiver: Receiver
) -> None:
    receiver.failures = [500]  # the first notification is answered 500 and sent again
    repo = project(tmp_path, github, notify=[receiver.url])
    github.add_issue(1, "Add the two steps", TWO_TASKS)
    github.add_issue(2, "Doomed", "## Task 1: Never done\n\nThe agent fails.\n")
    github.fail_once("POST", "/issues/1/comments", 502)
    github.rate_limit_once("POST", "/issues/1/labels", retry_after=1)
    logs = tmp_path / "agent-log"
    logs.mkdir()
    env = {**os.environ, "FLEET_AGENT_DIR": str(logs), "FLEET_AGENT_FAIL": "GH-2"}
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
    assert done.returncode == 3, (done.stdout, done.stderr)  # GH-2 is left interrupted
    assert lines[-1]["tickets"] == {"GH-1": "completed", "GH-2": "interrupted"}

    # the branch is on the bare origin, with the agent's two commits
    origin = tmp_path / "origin.git"
    assert git(origin, "rev-parse", "cairn/GH-1") == git(repo, "rev-parse", "cairn/GH-1")
    files = git(origin, "ls-tree", "-r", "--name-only", "cairn/GH-1", "work").split()
    assert files == ["work/GH-1-task-1.txt", "work/GH-1-task-2.txt"]
    assert git(origin, "branch", "--list", "cairn/GH-2") == ""

    # one pull request, from the pushed branch, its body the change summary and Closes #1
    [pull] = github.pulls
    assert (pull["head"], pull["base"], pull["draft"]) == ("cairn/GH-1", "main", False)
    assert pull["title"] == "Add the two steps"
    summary = next((repo / ".git/cairn/tickets/GH-1").glob("*/*_coder_change-summary.md"))
    body = summary.read_text().split("\n---\n", 1)[1].strip()
    assert pull["body"].startswith(body[:200]) and pull["body"].endswith("\n\nCloses #1\n")
    assert "## Status\nCompleted — 2 of 2 tasks" in pull["body"]

    # labels moved, comments said each step; the 502 and the 429 were answered and retried
    assert github.labels(1) == ["cairn", "cairn:done"]
    assert github.labels(2) == ["cairn", "cairn:needs-review"]
    sig = "\n\n— cairn"
    assert github.comments_on(1) == [
        f"Started attempt 1 of 2 on branch `cairn/GH-1`.{sig}",
        f"Completed — 2 of 2 tasks\n\nBranch `cairn/GH-1` pushed; pull request opened.{sig}",
    ]
    two = github.comments_on(2)
    assert len(two) == 4, two
    assert two[0] == f"Started attempt 1 of 2 on branch `cairn/GH-2`.{sig}"
    assert two[1].startswith("Interrupted — error after task 0 of 1")
    assert "the agent fails\n\nNo snapshot was taken.\n\nAttempt 2 of 2 starts at " in two[1]
    assert two[2].startswith("Started attempt 2 of 2 on branch `cairn/GH-2` (resuming")
    assert two[3].startswith("Interrupted — error after task 0 of 1")
    assert "\n\nerror: " in two[3]  # the agent's error line is kept in the detail
    assert "the agent fails; 2 of 2 attempts used: cairn resume GH-2 continues it\n\n" in two[3]
    assert 502 in [s.status for s in github.requests("POST", "/issues/1/comments")]
    assert 429 in [s.status for s in github.requests("POST", "/issues/1/labels")]
    assert outbox(repo) == []
    # the pull request came after the push (the fake refuses a head the remote lacks)
    assert [s.status for s in github.requests("POST", "/pulls")] == [201]

    # the webhooks: one per ended ticket, the first one after a 500
    assert receiver.answered[0] == 500
    ended = {post["ticket"]: post for post in receiver.posts}
    assert set(ended) == {"GH-1", "GH-2"}
    assert ended["GH-1"]["state"] == "completed"
    assert ended["GH-1"]["branch"] == "cairn/GH-1"
    assert ended["GH-1"]["status_line"].startswith("Completed")
    assert ended["GH-2"]["state"] == "interrupted" and ended["GH-2"]["attempt"] == 2

    # the ticket page links the pull request; approving the ticket approves it on GitHub
    from cairn.fleet import pulls
    from cairn.state.layout import discover

    _, _, layout = discover(repo)
    assert pulls.read(layout, "GH-1") == {"url": pull["html_url"], "number": pull["number"]}
    approved = cairn("review", "GH-1", "--approve", "--by", "ana", cwd=repo, env=env)
    assert approved.returncode == 0, (approved.stdout, approved.stderr)
    assert fleetstate.read(layout, "GH-1").state == "approved"  # type: ignore[union-attr]
    [(number, review)] = github.reviews
    assert (number, review["state"]) == (pull["number"], "APPROVED")
    assert review["body"].startswith("Approved in cairn (approved by ana at ")
    assert "cairn:done" in github.labels(1) and outbox(repo) == []
    assert ended["GH-2"]["snapshot"]["ref"] == "refs/cairn/wip/GH-2"

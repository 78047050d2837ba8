"""The ``linear`` tracker against a fake Linear GraphQL server on 127.0.0.1 (tests/fleet/
fake_linear.py, which validates every query against a subset of Linear's schema): issues in,
workflow states moved, comments with their keys, the branch's or pull request's link attached,
refused issues, a RATELIMITED answer and a 5xx mid-run, lost answers adopted, bad set-ups
refused at start, malformed answers survived. The last test is the whole fleet: ``cairn fleet
start --once`` with a bare repository as ``origin``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import msgspec
import pytest

from cairn.fleet import fleetstate, pulls
from cairn.fleet.linear_api import key_of
from cairn.fleet.trackers import Candidate
from cairn.util import clock
from fleet.fake_linear import KEY, FakeLinear, serve
from fleet.fleet_setup import TWO_TASKS, queued
from fleet.linear_setup import BRANCH_URL, outbox, project, tracker_for
from helpers import assert_one_line_error, cairn, git


@pytest.fixture
def linear() -> Iterator[FakeLinear]:
    fake = FakeLinear()
    fake.add_team("IDE", "Ide")
    fake.add_team("OPS", "Operations")
    yield from serve(fake)
    assert fake.invalid == []  # every query the tracker sent is one Linear's schema takes


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINEAR_API_KEY", KEY)


def test_a_personal_key_is_sent_as_it_is() -> None:
    assert key_of(KEY) == KEY
    assert key_of(f"Bearer {KEY}") == KEY  # Linear takes Bearer for OAuth tokens only
    assert key_of("Bearer oauth-token") == "Bearer oauth-token"


def test_the_fake_refuses_a_query_linears_schema_refuses(linear: FakeLinear) -> None:
    """The fake is a check of the tracker's queries: IssueFilter has no ``identifier``."""
    import httpx2 as httpx

    query = '{ issues(filter: {identifier: {eq: "IDE-1"}}) { nodes { id } } }'
    answer = httpx.post(linear.url, json={"query": query}, headers={"Authorization": KEY})
    assert answer.status_code == 400 and "identifier" in answer.text
    assert len(linear.invalid) == 1
    linear.invalid.clear()


def test_unstarted_labelled_issues_of_the_team_become_tickets(
    tmp_path: Path, linear: FakeLinear
) -> None:
    repo = project(tmp_path, linear)
    linear.add_issue("IDE-1", "Add login", TWO_TASKS)
    linear.add_issue("IDE-2", "Not decided yet", TWO_TASKS, state="Backlog")
    linear.add_issue("IDE-3", "A person's work", TWO_TASKS, state="In Progress")
    linear.add_issue("IDE-4", "Done before", TWO_TASKS, state="Done")
    linear.add_issue("IDE-5", "Not for cairn", TWO_TASKS, labels=("bug",))
    linear.add_issue("IDE-6", "No plan", "   ")
    linear.add_issue("IDE-12", "Fix logout", "- [ ] log out\n")
    linear.add_issue("OPS-1", "Another team's", TWO_TASKS)
    tracker, layout = tracker_for(repo)
    plans = repo / ".git/cairn/fleet/linear/plans"
    assert tracker.candidates() == [
        Candidate("IDE-1", plans / "IDE-1.md"),
        Candidate("IDE-12", plans / "IDE-12.md"),
    ]
    assert (plans / "IDE-1.md").read_text() == TWO_TASKS.replace("\r\n", "\n").strip() + "\n"
    assert [(r.ticket, r.plan, r.reason.split(";")[0]) for r in tracker.rejected] == [
        (
            "IDE-6",
            "https://linear.test/acme/issue/IDE-6",
            "issue IDE-6 has no plan in its description",
        )
    ]
    [listed] = linear.requests("issues")
    assert listed.variables["team"] == "IDE" and listed.variables["label"] == "cairn"
    assert listed.variables["types"] == ["unstarted", "started"]
    # the refused issue hears it once (at the next poll: from the outbox), its key hidden in it;
    # a supervisor that has not listed yet finds the issue's id by its identifier first
    fresh, _ = tracker_for(repo)
    fresh.flush()
    assert linear.requests("issue")[-1].variables == {"id": "IDE-6"}
    [said] = linear.comments_on("IDE-6")
    assert said.startswith(
        "cairn cannot run this issue: issue IDE-6 has no plan in its description"
    )
    assert "editing its description is enough" in said
    tracker.candidates()
    assert len(linear.comments_on("IDE-6")) == 1
    assert tracker.claim("IDE-1") and not tracker.claim("IDE-3") and not tracker.claim("IDE-4")
    # an edit of the description reaches the plan until the ticket starts, not after
    linear.issues["IDE-1"]["description"] = "## Task 1: Only step\n"
    tracker.candidates()
    assert (plans / "IDE-1.md").read_text() == "## Task 1: Only step\n"
    queued(layout, "IDE-1", state_after="running")
    linear.issues["IDE-1"]["description"] = "## Task 1: Something else\n"
    linear.issues["IDE-1"]["state"] = linear.state_id("IDE", "In Progress")  # cairn moved it
    assert [c.ticket for c in tracker.candidates()] == ["IDE-1", "IDE-12"]
    assert (plans / "IDE-1.md").read_text() == "## Task 1: Only step\n"
    # a completed ticket is not offered again, wherever its issue is
    queued(layout, "IDE-12", state_after="completed", attempt=1)
    assert [c.ticket for c in tracker.candidates()] == ["IDE-1"]


def test_states_comments_and_the_link_follow_the_ticket(tmp_path: Path, linear: FakeLinear) -> None:
    repo = project(tmp_path, linear, push=False)
    linear.add_issue("IDE-7", "Add login", TWO_TASKS)
    linear.add_issue("IDE-8", "Reviewed", TWO_TASKS)
    tracker, layout = tracker_for(repo)
    tracker.candidates()
    queued(layout, "IDE-7", attempt=1)
    tracker.transition("IDE-7", "running")
    assert linear.state_of("IDE-7") == "In Progress"
    assert linear.comments_on("IDE-7") == [
        "Started attempt 1 of 2 on branch `cairn/IDE-7`.\n\n— cairn"
    ]
    assert linear.keys_on("IDE-7") == ["cairn:IDE-7:1:running:comment"]
    # the same transition told twice (its supervisor died before it recorded telling it)
    tracker.transition("IDE-7", "running")
    assert len(linear.comments_on("IDE-7")) == 1

    queued(layout, "IDE-7", "completed", attempt=1)
    tracker.finish("IDE-7", "completed")
    assert linear.state_of("IDE-7") == "Done"
    said = linear.comments_on("IDE-7")[-1]
    assert said.startswith("Completed: (no change summary yet)\n\nBranch `cairn/IDE-7` ready; ")
    url = BRANCH_URL.format(branch="cairn/IDE-7")
    assert linear.links_on("IDE-7") == [(url, "Add login")]
    assert outbox(repo) == []

    # needs review: the pull request recorded for the branch is the link
    queued(layout, "IDE-8", "needs_review", attempt=1, detail="a reviewer must look")
    pull = {"html_url": "https://git.test/acme/app/pull/5", "number": 5}
    pulls.record(layout, "IDE-8", pull)
    tracker.finish("IDE-8", "needs_review")
    assert linear.state_of("IDE-8") == "In Review"
    assert linear.links_on("IDE-8") == [("https://git.test/acme/app/pull/5", "Reviewed")]
    assert linear.comments_on("IDE-8")[-1].startswith("Needs review: a reviewer must look")

    # needs input moves it to the input state; failed with no failed state leaves it
    queued(layout, "IDE-8", "needs_input", attempt=2)
    linear.issues["IDE-8"]["state"] = linear.state_id("IDE", "In Progress")
    tracker.finish("IDE-8", "needs_input")
    assert linear.state_of("IDE-8") == "In Review"
    queued(layout, "IDE-8", "failed", attempt=3)
    moves = len(linear.requests("issueUpdate"))
    tracker.finish("IDE-8", "failed")
    assert len(linear.requests("issueUpdate")) == moves
    assert linear.comments_on("IDE-8")[-1].startswith("Failed: ")


def test_a_ratelimited_answer_and_a_502_mid_run_lose_nothing(
    tmp_path: Path, linear: FakeLinear
) -> None:
    repo = project(tmp_path, linear)
    linear.add_issue("IDE-7", "Add login", TWO_TASKS)
    tracker, layout = tracker_for(repo)
    tracker.candidates()
    queued(layout, "IDE-7", attempt=1)

    # RATELIMITED (HTTP 400, Retry-After: 1) on the move is retried in place: Linear did not
    # act on it. A 502 on the comment is not: Linear may have posted it; it stays in the
    # outbox, its outcome unknown
    linear.rate_limit_once("issueUpdate", retry_after=1)
    linear.fail_once("commentCreate", 502)
    tracker.transition("IDE-7", "running")
    assert [s.status for s in linear.requests("issueUpdate")] == [400, 200]
    assert [s.status for s in linear.requests("commentCreate")] == [502]
    [unsure] = outbox(repo)
    assert unsure["kind"] == "comment" and unsure["sending"] and unsure["tries"] == 1
    # the next poll looks for it first (it is not there), then posts it, once
    looked = len(linear.requests("issue"))  # issue(id:) { comments }
    tracker.flush()
    assert len(linear.requests("issue")) == looked + 1
    assert [s.status for s in linear.requests("commentCreate")] == [502, 200]
    assert linear.keys_on("IDE-7") == ["cairn:IDE-7:1:running:comment"]
    assert linear.state_of("IDE-7") == "In Progress" and outbox(repo) == []

    # a rate limit whose reset is a minute away is not slept through: the comment waits, the
    # tracker calls nothing until the reset (not even the listing), then sends it
    linear.rate_limit_once("commentCreate", retry_after=None)
    record = fleetstate.read(layout, "IDE-7")
    assert record is not None
    later = clock.now() + timedelta(seconds=30)
    fleetstate.write(
        layout, msgspec.structs.replace(record, state="retrying", next_attempt_at=later)
    )
    tracker.transition("IDE-7", "retrying", "Interrupted — max_turns")
    [waiting] = outbox(repo)
    assert "rate limited" in waiting["last_error"] and tracker.blocked_until > 0
    asked = len(linear.seen)
    tracker.candidates()
    assert len(linear.seen) == asked
    tracker.blocked_until = 0  # the reset has come
    tracker.candidates()
    assert outbox(repo) == []
    said = linear.comments_on("IDE-7")[-1]
    assert said.startswith("Interrupted: Interrupted — max_turns")
    assert "Attempt 2 of 2 starts at" in said


def test_a_lost_answer_is_looked_for_and_adopted(tmp_path: Path, linear: FakeLinear) -> None:
    repo = project(tmp_path, linear, push=False)
    linear.add_issue("IDE-9", "Add login", TWO_TASKS)
    tracker, layout = tracker_for(repo)
    tracker.candidates()
    queued(layout, "IDE-9", attempt=1)
    linear.lose_answer_once("commentCreate")  # posted, and the answer lost
    tracker.transition("IDE-9", "running")
    assert len(linear.comments_on("IDE-9")) == 1
    [unsure] = outbox(repo)
    assert unsure["sending"]
    # were Linear to drop the hidden key from the markdown, the comment's id still names it
    posted = linear.comments[-1]
    posted["body"] = posted["body"].split("\n<!--")[0]
    assert linear.keys_on("IDE-9") == ["-"]
    fresh, _ = tracker_for(repo)  # the next supervisor: it finds the comment by its id
    fresh.candidates()
    assert len(linear.comments_on("IDE-9")) == 1 and outbox(repo) == []
    assert any("had been posted; adopted" in w for w in fresh.said())
    # an attachment is per url: sent again, it is the same one
    queued(layout, "IDE-9", "completed", attempt=1)
    linear.lose_answer_once("attachmentCreate")
    fresh.finish("IDE-9", "completed")
    assert [m["kind"] for m in outbox(repo)] == ["link", "comment", "state"]
    fresh.flush()
    assert len(linear.links_on("IDE-9")) == 1 and outbox(repo) == []
    assert linear.state_of("IDE-9") == "Done"


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (b"<html><body>Bad gateway</body></html>", "text/html"),
        (b'{"data": {"iss', "application/json"),
        (b'{"message": "no data here"}', "application/json"),
        (b'{"data": {"issues": null}}', "application/json"),
        (b'{"data": {"issues": {"nodes": "IDE-1"}}}', "application/json"),
        (b"null", "application/json"),
    ],
)
def test_a_malformed_answer_is_a_warning_and_the_last_list_holds(
    tmp_path: Path, linear: FakeLinear, answer: bytes, kind: str
) -> None:
    repo = project(tmp_path, linear)
    linear.add_issue("IDE-1", "Add login", TWO_TASKS)
    tracker, _ = tracker_for(repo)
    first = tracker.candidates()
    assert [c.ticket for c in first] == ["IDE-1"]
    linear.answer_raw_once("issues", 200, answer, kind)
    assert tracker.candidates() == first
    assert tracker.trouble is not None and "listing the issues failed" in tracker.trouble
    [warning] = tracker.said()
    assert warning.startswith("linear: listing the issues failed") and "\n" not in warning
    assert tracker.candidates() == first and tracker.trouble is None


@pytest.mark.parametrize(
    ("extra", "env", "fragment"),
    [
        ("", {"LINEAR_API_KEY": ""}, "set LINEAR_API_KEY to a personal API key"),
        ("", {"LINEAR_API_KEY": "lin_api_wrong"}, "linear refused the API key"),
        ('label = "agent"\n', {}, "label 'agent' is not a label of team IDE"),
        ('[fleet.linear.states]\nstarted = "Doing"\n', {}, "Backlog, Canceled, Done, In Progress"),
    ],
)
def test_a_bad_set_up_is_refused_at_start_before_anything_is_written(
    tmp_path: Path, linear: FakeLinear, extra: str, env: dict[str, str], fragment: str
) -> None:
    repo = project(tmp_path, linear, extra=extra)
    result = cairn("fleet", "start", "--once", cwd=repo, env=env)
    assert_one_line_error(result)
    assert fragment in result.stderr
    assert not (repo / ".git/cairn/fleet").exists()


def test_an_unknown_team_is_refused_naming_the_known_ones(
    tmp_path: Path, linear: FakeLinear
) -> None:
    repo = project(tmp_path, linear)
    toml = repo / "cairn.toml"
    toml.write_text(toml.read_text().replace('team = "IDE"', 'team = "APP"'))
    result = cairn("fleet", "start", "--once", cwd=repo)
    assert_one_line_error(result)
    assert "team 'APP' is not a Linear team the key sees; the team keys: IDE, OPS" in result.stderr
    assert not (repo / ".git/cairn/fleet").exists()


def test_fleet_start_once_runs_the_issues_and_tells_linear(
    tmp_path: Path, linear: FakeLinear
) -> None:
    repo = project(tmp_path, linear)
    linear.add_issue("IDE-1", "Add the two steps", TWO_TASKS)
    linear.add_issue("IDE-2", "Doomed", "## Task 1: Never done\n\nThe agent fails.\n")
    linear.fail_once("issueUpdate", 502)  # retried in place: a move is idempotent
    linear.rate_limit_once("commentCreate", retry_after=1)
    logs = tmp_path / "agent-log"
    logs.mkdir()
    env = {**os.environ, "FLEET_AGENT_DIR": str(logs), "FLEET_AGENT_FAIL": "IDE-2"}
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
    assert done.returncode == 3, (done.stdout, done.stderr)  # IDE-2 is left interrupted
    assert lines[-1]["tickets"] == {"IDE-1": "completed", "IDE-2": "interrupted"}

    # the branch is on the bare origin, with the agent's two commits, and linked on the issue
    origin = tmp_path / "origin.git"
    assert git(origin, "rev-parse", "cairn/IDE-1") == git(repo, "rev-parse", "cairn/IDE-1")
    assert git(origin, "branch", "--list", "cairn/IDE-2") == ""
    assert linear.links_on("IDE-1") == [
        (BRANCH_URL.format(branch="cairn/IDE-1"), "Add the two steps")
    ]
    assert linear.links_on("IDE-2") == []

    # states moved, comments said each step; the 502 and RATELIMITED were answered and retried
    assert linear.state_of("IDE-1") == "Done"
    assert linear.state_of("IDE-2") == "In Progress"  # no failed state configured: it stays
    sig = "\n\n— cairn"
    assert linear.comments_on("IDE-1") == [
        f"Started attempt 1 of 2 on branch `cairn/IDE-1`.{sig}",
        "Completed — 2 of 2 tasks\n\nBranch `cairn/IDE-1` pushed; its link is attached to "
        f"this issue.{sig}",
    ]
    two = linear.comments_on("IDE-2")
    assert len(two) == 4, two
    assert two[1].startswith("Interrupted — error after task 0 of 1")
    assert "Attempt 2 of 2 starts at " in two[1]
    assert two[2].startswith("Started attempt 2 of 2 on branch `cairn/IDE-2` (resuming")
    assert "2 of 2 attempts used: cairn resume IDE-2 continues it" in two[3]
    assert len(set(linear.keys_on("IDE-1") + linear.keys_on("IDE-2"))) == 6  # each its own key
    assert 502 in [s.status for s in linear.requests("issueUpdate")]
    assert 400 in [s.status for s in linear.requests("commentCreate")]
    assert outbox(repo) == []


def test_the_branch_link_comes_from_the_remote_or_is_said_missing(
    tmp_path: Path, linear: FakeLinear
) -> None:
    repo = project(tmp_path, linear, push=False)
    toml = repo / "cairn.toml"
    toml.write_text("\n".join(x for x in toml.read_text().split("\n") if "branch_url" not in x))
    linear.add_issue("IDE-1", "On a forge", TWO_TASKS)
    linear.add_issue("IDE-2", "On a path", TWO_TASKS)
    tracker, layout = tracker_for(repo)
    tracker.candidates()
    # the remote a path (the bare origin): no web address; said once, the comment says no link
    queued(layout, "IDE-2", "completed", attempt=1)
    tracker.finish("IDE-2", "completed")
    assert linear.links_on("IDE-2") == []
    assert linear.comments_on("IDE-2")[-1].endswith("Branch `cairn/IDE-2` ready.\n\n— cairn")
    assert any("set [fleet.linear] branch_url" in w for w in tracker.said())
    # an scp-like GitHub remote: its tree URL
    git(repo, "remote", "set-url", "origin", "git@github.com:acme/app.git")
    queued(layout, "IDE-1", "completed", attempt=1)
    tracker.finish("IDE-1", "completed")
    url = "https://github.com/acme/app/tree/cairn/IDE-1"
    assert linear.links_on("IDE-1") == [(url, "On a forge")]
    assert outbox(repo) == []


def test_a_done_issue_sent_back_for_a_fix_round_runs_again(
    tmp_path: Path, linear: FakeLinear
) -> None:
    repo = project(tmp_path, linear, push=False)
    linear.add_issue("IDE-6", "Reviewed later", TWO_TASKS, state="Done")
    queued(layout := tracker_for(repo)[1], "IDE-6", "completed", attempt=1)
    assert tracker_for(repo)[0].candidates() == []  # done: not offered
    detail = "fix round 1 asked by ana: R1"
    queued(layout, "IDE-6", "retrying", attempt=0, last_reason="fix_round", detail=detail)
    later, _ = tracker_for(repo)
    assert [c.ticket for c in later.candidates()] == ["IDE-6"] and later.claim("IDE-6")
    later.transition("IDE-6", "retrying", detail)
    [said] = linear.comments_on("IDE-6")
    assert said.startswith(f"A fix round was asked for ({detail}): the run of branch `cairn/IDE-6`")

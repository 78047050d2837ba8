"""GitHub answers no GitHub gives never kill the supervisor (docs/fleet.md, "The github
tracker"), and a refused issue is told once.

These parametrized tests are the bad-input corpus for tracker answers (tests/corpus/README.md):
each hostile answer is served by the fake GitHub on 127.0.0.1 (tests/fleet/fake_github.py). A
listing that is not a JSON list of issues is a warning and the last good list holds; one bad
issue is refused alone while the others go on; a token GitHub refuses at the first listing is
bad input (exit 2 with the fix).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.fleet.trackers import Candidate
from fleet.fake_github import TOKEN, FakeGitHub, Raw, serve
from fleet.fleet_setup import TWO_TASKS, finish, project, queued, supervisor, tracker_for, wait_for
from helpers import assert_one_line_error, cairn

HTML = b"<!doctype html><html><body><h1>Proxy error</h1><p>upstream timed out</p></body></html>"
LISTINGS = {  # case → (the raw answer to the issue listing, a fragment of the warning)
    "proxy-html-page": (Raw(200, {"Content-Type": "text/html"}, HTML), "is not JSON (text/html"),
    "cut-body": (Raw(200, {}, b'[{"number": 1, "title": "Add log'), "is not JSON"),
    "json-object": (Raw(200, {}, b'{"message": "Moved", "items": []}'), "a JSON dict, not a list"),
    "json-null": (Raw(200, {}, b"null"), "a JSON NoneType, not a list"),
    "redirect-301": (
        Raw(301, {"Location": "https://elsewhere.test/"}, b""),
        "HTTP 301, a redirect to https://elsewhere.test/",
    ),
    "redirect-302": (Raw(302, {"Location": "/login"}, HTML), "HTTP 302, a redirect to /login"),
    "html-502": (Raw(502, {"Content-Type": "text/html"}, HTML), "HTTP 502"),
}
ODD = {  # case → (an entry of the listing, a fragment of its reason)
    "no-number": ({"title": "x", "body": TWO_TASKS, "labels": [{"name": "cairn"}]}, "no number"),
    "negative-number": ({"number": -3, "title": "x", "body": TWO_TASKS}, "-3 is not a positive"),
    "zero": ({"number": 0, "title": "x", "body": TWO_TASKS}, "0 is not a positive"),
    "string-number": ({"number": "7", "title": "x", "body": TWO_TASKS}, "'7' is not a positive"),
    "float-number": ({"number": 7.5, "title": "x", "body": TWO_TASKS}, "7.5 is not a positive"),
    "bool-number": ({"number": True, "title": "x", "body": TWO_TASKS}, "True is not a positive"),
    "a-string": ("#7 fix the login", "a JSON str, not an issue"),
    "a-list": ([1, 2], "a JSON list, not an issue"),
}


@pytest.fixture
def github(tmp_path: Path) -> Iterator[FakeGitHub]:
    yield from serve(FakeGitHub(remote=tmp_path / "origin.git"))


@pytest.fixture(autouse=True)
def token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GH_TOKEN", raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)


@pytest.mark.parametrize("case", sorted(LISTINGS))
def test_a_hostile_listing_is_a_warning_and_the_last_good_list_holds(
    tmp_path: Path, github: FakeGitHub, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    answer, fragment = LISTINGS[case]
    repo = project(tmp_path, github)
    github.add_issue(1, "Add login", TWO_TASKS)
    tracker, _ = tracker_for(repo)
    plan = repo / ".git/cairn/fleet/github/plans/GH-1.md"
    assert tracker.candidates() == [Candidate("GH-1", plan)]
    capsys.readouterr()
    github.listing = answer
    assert tracker.candidates() == [Candidate("GH-1", plan)]  # the last good list holds
    assert tracker.trouble is not None and fragment in tracker.trouble, tracker.trouble
    assert capsys.readouterr().err == ""  # the tracker's owner says it
    (warning,) = tracker.said()
    assert tracker.said() == []
    assert warning.startswith("github: listing the issues failed (")
    assert fragment in warning and warning.endswith("the last list holds till the next poll")
    github.listing = None
    assert tracker.candidates() == [Candidate("GH-1", plan)] and tracker.trouble is None


@pytest.mark.parametrize("case", sorted(ODD))
def test_one_bad_issue_is_refused_alone(
    tmp_path: Path, github: FakeGitHub, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    entry, fragment = ODD[case]
    repo = project(tmp_path, github)
    github.add_issue(1, "Add login", TWO_TASKS)
    github.add_issue(2, "Log out", "- [ ] log out\n")
    github.odd = [entry]
    tracker, _ = tracker_for(repo)
    assert [c.ticket for c in tracker.candidates()] == ["GH-1", "GH-2"]
    (refused,) = tracker.rejected
    assert refused.ticket is None and fragment in refused.reason, refused
    assert refused.plan == "entry 3 of the issue listing"
    assert tracker.trouble is None and capsys.readouterr().err == ""
    tracker.flush()
    assert github.comments == []  # an entry without a number has no issue to comment on


def test_a_refused_issue_gets_one_comment_again_only_when_its_body_changes(
    tmp_path: Path, github: FakeGitHub
) -> None:
    repo = project(tmp_path, github)
    github.add_issue(1, "Add login", TWO_TASKS)
    github.add_issue(3, "No plan", "   ")
    tracker, _ = tracker_for(repo)
    assert [c.ticket for c in tracker.candidates()] == ["GH-1"]
    tracker.candidates()  # the comment goes out at the next poll's flush
    (said,) = github.comments_on(3)
    assert "issue #3 has no plan in its body; write its tasks there" in said
    for _ in range(2):
        tracker.candidates()
    again, _ = tracker_for(repo)  # the next supervisor
    again.candidates()
    again.candidates()
    assert github.comments_on(3) == [said]
    github.issues[3]["body"] = "Please make it work."  # changed, still not a plan
    again.candidates()
    again.candidates()
    assert len(github.comments_on(3)) == 2
    assert "issue #3:1: no tasks found" in github.comments_on(3)[1]
    github.issues[3]["body"] = "- [ ] make it work\n"  # a plan now: a ticket
    assert [c.ticket for c in again.candidates()] == ["GH-1", "GH-3"]
    assert again.rejected == [] and len(github.comments_on(3)) == 2
    # refused rows in `fleet status`: the issue's URL and why, until the next poll finds none
    github.issues[3]["body"] = ""
    github.add_issue(4, "Also empty", "")
    result = cairn("fleet", "start", "--once", "--json", "--concurrency", "1", cwd=repo, env={})
    assert "Traceback" not in result.stderr, result.stderr
    rows = json.loads(cairn("fleet", "status", "--json", cwd=repo).stdout)
    refused = {r["ticket"]: r for r in rows if r["state"] == "refused"}
    assert set(refused) == {"GH-3", "GH-4"}
    assert refused["GH-4"]["plan"] == "https://github.test/octo/app/issues/4"
    assert refused["GH-4"]["detail"].startswith("issue #4 has no plan in its body")


@pytest.mark.parametrize(
    ("status", "fix"),
    [
        (401, "set GITHUB_TOKEN or GH_TOKEN to a valid token"),
        (403, "give the token read and write access to octo/app's issues and pull requests"),
        (404, "fix [fleet.github] repo and api_url"),
    ],
)
def test_a_refused_first_listing_is_bad_input(
    tmp_path: Path, github: FakeGitHub, status: int, fix: str
) -> None:
    repo = project(tmp_path, github)
    github.add_issue(1, "Add login", TWO_TASKS)
    env = {}
    if status == 401:
        env["GITHUB_TOKEN"] = "ghp_revoked"
    else:
        message = json.dumps({"message": "Resource not accessible by integration"}).encode()
        github.listing = Raw(status, {}, message)
    result = cairn("fleet", "start", "--once", cwd=repo, env=env)
    assert_one_line_error(result, 2)
    assert f"HTTP {status}" in result.stderr and fix in result.stderr, result.stderr
    assert not (tmp_path / "repo.cairn").exists()


def test_a_once_whose_only_listing_failed_exits_3(tmp_path: Path, github: FakeGitHub) -> None:
    repo = project(tmp_path, github)
    github.add_issue(1, "Add login", TWO_TASKS)
    github.listing = LISTINGS["proxy-html-page"][0]
    result = cairn("fleet", "start", "--once", cwd=repo)
    assert result.returncode == 3, (result.stdout, result.stderr)
    assert result.stdout.splitlines()[-1] == (
        "fleet: nothing listed, the tracker could not be read (exit 3)"
    )
    assert "is not JSON (text/html" in result.stderr and "Traceback" not in result.stderr


def test_a_long_running_supervisor_outlives_hostile_listings(
    tmp_path: Path, github: FakeGitHub
) -> None:
    """Every hostile answer in turn, one poll each: the supervisor lives on, refuses the odd
    issue alone, and stops as asked (exit 3), no traceback."""
    repo = project(tmp_path, github, poll_interval="0.5s")  # the supervisor's floor: its tick
    github.odd = [ODD["negative-number"][0]]
    proc = supervisor(repo, {"GITHUB_TOKEN": TOKEN})
    try:

        def listed() -> int:
            return len(github.requests("GET", "/issues"))

        wait_for(lambda: listed() >= 1, what="the first listing")
        for answer, _ in LISTINGS.values():
            github.listing = answer
            seen = listed()
            wait_for(lambda seen=seen: listed() > seen, what="a poll")
            assert proc.poll() is None, proc.communicate()
        github.listing = None
        seen = listed()
        wait_for(lambda: listed() > seen, what="a good poll")
        assert proc.poll() is None
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
    code, lines = finish(proc)
    assert code == 3
    refused: list[dict[str, Any]] = [e for e in lines if e["event"] == "ticket_refused"]
    assert [(e["ticket"], e["plan"]) for e in refused] == [(None, "entry 1 of the issue listing")]


def test_an_issue_under_way_keeps_its_plan_when_its_body_is_emptied(
    tmp_path: Path, github: FakeGitHub
) -> None:
    repo = project(tmp_path, github)
    github.add_issue(1, "Add login", TWO_TASKS)
    tracker, layout = tracker_for(repo)
    assert [c.ticket for c in tracker.candidates()] == ["GH-1"]
    queued(layout, "GH-1", "retrying", attempt=1)  # started: its plan is the one it runs
    github.issues[1]["body"] = ""
    assert [c.ticket for c in tracker.candidates()] == ["GH-1"] and tracker.rejected == []
    assert tracker.claim("GH-1")
    tracker.flush()
    assert github.comments == []

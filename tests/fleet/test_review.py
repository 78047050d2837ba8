"""A person's review of a fleet ticket (docs/fleet.md, "Reviewing a ticket"): comments on lines
of its branch diff become findings R1, R2, … of a fix round the agent answers, or the ticket is
approved. Real fleets (``cairn fleet start``, real worktrees, the command agent of
tests/fleet/fleet_agent.py, which fixes a finding's line and answers it FIXED, or NOT_FIXED when
the comment says ``wontfix``); the API in-process (Starlette's TestClient) and through the
server of a running supervisor; the CLI as a subprocess."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cairn.fleet.dashboard.app import make_app
from fleet.dashboard_setup import LOCAL
from fleet.fleet_setup import agent_env, fleet_repo, record, supervisor, wait_for, wait_line
from helpers import assert_one_line_error, cairn, git, isolate_git_env

TICKET = "REV-1"
FILE = f"work/{TICKET}-task-1.txt"  # the agent's file: one line, "REV-1 task 1"
FIRST = f"work/{TICKET}-task-2.txt"


def state_files(repo: Path) -> dict[str, str]:
    """Every file under the state root, by path, as a digest: to show nothing was written."""
    root = repo / ".git" / "cairn"
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.name not in ("lease", ".lock") and "lock" not in path.name:
            found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def completed_fleet(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A fleet whose ticket REV-1 (two tasks) completed under ``cairn fleet start --once``."""
    repo = fleet_repo(tmp_path, {TICKET: 2})
    env = agent_env(tmp_path)
    result = cairn("fleet", "start", "--once", "--json", cwd=repo, env=env)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert record(repo, TICKET)["state"] == "completed"
    return repo, env


@pytest.fixture
def done(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    return completed_fleet(tmp_path)


@pytest.fixture(scope="module")
def done_shared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """``done`` once for the module: only for tests that show they write nothing."""
    with pytest.MonkeyPatch.context() as patch:  # built before the autouse isolation applies
        isolate_git_env(patch, tmp_path_factory.mktemp("home"))
        return completed_fleet(tmp_path_factory.mktemp("review"))


def state_of(repo: Path) -> str | None:
    path = repo / ".git" / "cairn" / "fleet" / "tickets" / f"{TICKET}.json"
    return str(json.loads(path.read_text())["state"]) if path.exists() else None


def journal_events(repo: Path, name: str) -> list[dict[str, Any]]:
    runs = sorted((repo / ".git" / "cairn" / "tickets" / TICKET).glob("2*"))
    lines = (runs[-1] / "run-log.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("event") == name]


def test_cli_request_changes_runs_a_fix_round_the_agent_answers(
    done: tuple[Path, dict[str, str]],
) -> None:
    repo, env = done
    asked = cairn(
        "review",
        TICKET,
        "--comment",
        f"{FILE}:1:say which task: it is the first",
        "--comment",
        f"{FIRST}:1:wontfix is fine here",
        "--request-changes",
        "--by",
        "ann",
        "--json",
        cwd=repo,
    )
    assert asked.returncode == 0, (asked.stdout, asked.stderr)
    said = json.loads(asked.stdout)
    assert said["event"] == "ticket_review"
    assert said["verdict"] == "request_changes" and said["round"] == 1
    assert [c["id"] for c in said["comments"]] == ["R1", "R2"]
    assert said["pending"] is False  # no supervisor: the command carried it out
    rec = record(repo, TICKET)
    assert rec["state"] == "retrying" and rec["last_reason"] == "fix_round"
    assert "asked by ann" in rec["detail"]
    (event,) = journal_events(repo, "fix_round")
    assert event["by"] == "ann" and event["why"] == "review" and event["round"] == 1
    assert event["commit"] == git(repo, "rev-parse", f"cairn/{TICKET}").strip()

    result = cairn("fleet", "start", "--once", "--json", cwd=repo, env=env)
    # R2 was answered NOT_FIXED: the ticket waits for the person again
    assert result.returncode == 1, (result.stdout, result.stderr)
    rec = record(repo, TICKET)
    assert rec["state"] == "needs_review", rec
    fixed = git(repo, "show", f"cairn/{TICKET}:{FILE}")
    assert fixed == f"{TICKET} task 1 # fixed R1\n"

    client = TestClient(make_app(repo, token=None), base_url=LOCAL)
    shown = client.get(f"/api/v1/tickets/{TICKET}/review").json()
    (round_,) = shown["reviews"]
    assert round_["verdict"] == "request_changes" and round_["by"] == "ann"
    r1, r2 = round_["comments"]
    assert (r1["id"], r1["status"], r1["outdated"], r1["line_now"]) == ("R1", "FIXED", True, None)
    assert r1["action"] == f"changed {FILE}:1"
    assert (r2["status"], r2["outdated"], r2["line_now"]) == ("NOT_FIXED", False, 1)

    # a second round, then approval
    again = cairn(
        "review", TICKET, "--comment", f"{FIRST}:1:now fix it", "--request-changes", cwd=repo
    )
    assert again.returncode == 0, again.stderr
    assert "fix round 2 of R1" in again.stdout
    assert cairn("fleet", "start", "--once", "--json", cwd=repo, env=env).returncode == 0
    assert record(repo, TICKET)["state"] == "completed"
    approved = cairn("review", TICKET, "--approve", "--by", "ann", cwd=repo)
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.startswith(f"{TICKET}: approved by ann at ")
    assert record(repo, TICKET)["state"] == "approved"
    shown = client.get(f"/api/v1/tickets/{TICKET}/review").json()
    assert [r["verdict"] for r in shown["reviews"]] == ["request_changes"] * 2 + ["approve"]
    assert [c["status"] for c in shown["reviews"][1]["comments"]] == ["FIXED"]
    assert len(journal_events(repo, "fix_round")) == 2
    assert len(journal_events(repo, "approved")) == 1


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--request-changes"], "request_changes needs at least one comment"),
        (["--comment", f"{FILE}:1:x"], "--request-changes"),
        (["--comment", f"{FILE}:1:x", "--request-changes", "--approve"], "one of them"),
        (["--comment", "no-line-here", "--request-changes"], "is not PATH:LINE:TEXT"),
        (["--comment", f"{FILE}:0:x", "--request-changes"], "--comment 1.line"),
        (["--comment", f"{FILE}:9:x", "--request-changes"], "is not a line of ticket"),
        (["--comment", "README.md:1:x", "--request-changes"], "is not a file of ticket"),
        (["--comment", f"{FILE}:1:   ", "--request-changes"], "--comment 1.body"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2_and_writes_nothing(
    done_shared: tuple[Path, dict[str, str]], args: list[str], words: str
) -> None:
    repo, _ = done_shared
    before = state_files(repo)
    result = cairn("review", TICKET, *args, cwd=repo)
    assert_one_line_error(result)
    assert words in result.stderr, result.stderr
    assert state_files(repo) == before


def test_cli_unknown_ticket_and_unreviewable_state(done: tuple[Path, dict[str, str]]) -> None:
    repo, _ = done
    result = cairn("review", "NOPE-9", "--approve", cwd=repo)
    assert_one_line_error(result)
    assert "no fleet ticket NOPE-9; the fleet's tickets are REV-1" in result.stderr
    assert cairn("fleet", "pause", TICKET, cwd=repo).returncode == 2  # finished: not pausable
    path = repo / ".git" / "cairn" / "fleet" / "tickets" / f"{TICKET}.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "state": "failed"}))
    before = state_files(repo)
    result = cairn("review", TICKET, "--comment", f"{FILE}:1:x", "--request-changes", cwd=repo)
    assert_one_line_error(result)
    assert "only a finished run" in result.stderr
    assert state_files(repo) == before


def assert_error(response: Any, status: int, code: str, words: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == code
    assert words in body["error"]["message"], body


def test_api_bad_input_each_its_error_and_nothing_changed(
    done: tuple[Path, dict[str, str]],
) -> None:
    repo, _ = done
    client = TestClient(make_app(repo, token=None), base_url=LOCAL)
    url = f"/api/v1/tickets/{TICKET}/review"
    line = {"path": FILE, "line": 1, "body": "x"}
    before = state_files(repo)
    cases: list[tuple[str, Any, int, str, str]] = [
        ("/api/v1/tickets/NOPE-9/review", {"verdict": "approve"}, 404, "unknown_ticket", "NOPE-9"),
        ("/api/v1/tickets/bad..id/review", {"verdict": "approve"}, 400, "invalid_ticket", "bad"),
        (url, [], 400, "invalid_review", "(body)"),
        (url, {"verdict": "maybe"}, 400, "invalid_review", "verdict:"),
        (url, {"verdict": "approve", "extra": 1}, 400, "invalid_review", "extra:"),
        (url, {"verdict": "approve", "comments": {}}, 400, "invalid_review", "comments:"),
        (url, {"verdict": "request_changes"}, 400, "invalid_review", "comments:"),
        (url, {"verdict": "request_changes", "comments": ["x"]}, 400, "invalid_review",
         "comments[0]:"),
        (url, {"verdict": "request_changes", "comments": [{**line, "line": "1"}]}, 400,
         "invalid_review", "comments[0].line:"),
        (url, {"verdict": "request_changes", "comments": [{**line, "line": True}]}, 400,
         "invalid_review", "comments[0].line:"),
        (url, {"verdict": "request_changes", "comments": [line, {**line, "path": 3}]}, 400,
         "invalid_review", "comments[1].path:"),
        (url, {"verdict": "request_changes", "comments": [{**line, "body": ""}]}, 400,
         "invalid_review", "comments[0].body:"),
        (url, {"verdict": "request_changes", "comments": [{**line, "side": "old"}]}, 400,
         "invalid_review", "comments[0].side:"),
        (url, {"verdict": "request_changes", "comments": [{**line, "line": 2}]}, 400,
         "not_in_diff", "comments[0].line:"),
        (url, {"verdict": "request_changes", "comments": [{**line, "path": "README.md"}]}, 400,
         "not_in_diff", "comments[0].path:"),
        (url, {"verdict": "approve", "by": ""}, 400, "invalid_review", "by:"),
    ]  # fmt: skip
    for path, body, status, code, words in cases:
        assert_error(client.post(path, json=body), status, code, words)
    assert_error(
        client.post(url, content=b"{not json", headers={"content-type": "application/json"}),
        400,
        "invalid_review",
        "(body)",
    )
    assert_error(client.get("/api/v1/tickets/NOPE-9/review"), 404, "unknown_ticket", "NOPE-9")
    assert state_files(repo) == before
    assert record(repo, TICKET)["state"] == "completed"

    # a ticket whose run is not finished cannot be reviewed: 409, nothing written
    held = repo / ".git" / "cairn" / "fleet" / "tickets" / f"{TICKET}.json"
    data = json.loads(held.read_text())
    held.write_text(json.dumps({**data, "state": "queued"}))
    before = state_files(repo)
    answer = client.post(url, json={"verdict": "request_changes", "comments": [line]})
    assert_error(answer, 409, "not_reviewable", "is queued")
    assert state_files(repo) == before


def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=30) as response:
        data: dict[str, Any] = json.loads(response.read())
        return data


@pytest.mark.slow
def test_api_through_a_running_supervisor(tmp_path: Path) -> None:
    repo = fleet_repo(tmp_path, {TICKET: 1})
    env = agent_env(tmp_path)
    proc = supervisor(repo, env, "--port", "0")
    try:
        base = wait_line(proc, "dashboard_started")["url"].rstrip("/")
        wait_for(lambda: state_of(repo) == "completed", what="completed")
        url = f"{base}/api/v1/tickets/{TICKET}/review"
        status, bad = post(url, {"verdict": "request_changes", "comments": []})
        assert status == 400 and bad["error"]["code"] == "invalid_review"
        comment = {"path": FILE, "line": 1, "body": "name the task"}
        status, said = post(url, {"verdict": "request_changes", "comments": [comment]})
        assert status == 200, said
        assert said["round"] == 1 and said["comments"][0]["id"] == "R1"
        assert said["by"] == "dashboard"

        def answered() -> bool:
            comments = get(url)["reviews"][0]["comments"]
            return bool(comments[0]["status"] == "FIXED")

        wait_for(answered, what="R1 answered")
        wait_for(lambda: state_of(repo) == "completed", what="completed again")
        assert git(repo, "show", f"cairn/{TICKET}:{FILE}") == f"{TICKET} task 1 # fixed R1\n"
        status, said = post(url, {"verdict": "approve", "comments": []})
        assert status == 200, said
        wait_for(lambda: state_of(repo) == "approved", what="approved")
        shown = get(url)
        assert [r["verdict"] for r in shown["reviews"]] == ["request_changes", "approve"]
        row = get(f"{base}/api/v1/state")["tickets"][0]
        assert row["state"] == "approved"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=60)


def test_a_comment_is_outdated_only_when_its_line_changed(tmp_path: Path) -> None:
    from cairn.fleet.comments import diff_lines, moved
    from cairn.git import Repo
    from helpers import make_repo

    repo = make_repo(tmp_path / "repo", {"a.txt": "".join(f"line {n}\n" for n in range(1, 8))})
    git_ = Repo.discover(repo).git
    first = git(repo, "rev-parse", "HEAD").strip()

    def commit(text: str) -> str:
        (repo / "a.txt").write_text(text)
        git(repo, "commit", "-qam", "change")
        return git(repo, "rev-parse", "HEAD").strip()

    lines = (repo / "a.txt").read_text().splitlines(keepends=True)
    above = commit("new 1\nnew 2\n" + "".join(lines))  # two lines above line 3
    assert moved(git_, first, above, "a.txt", 3) == (False, 5)
    below = commit("new 1\nnew 2\n" + "".join(lines) + "tail\n")  # and one below
    assert moved(git_, first, below, "a.txt", 3) == (False, 5)
    assert moved(git_, first, below, "a.txt", 7) == (False, 9)
    gone = commit("new 1\nnew 2\n" + "".join(lines[:2]) + "".join(lines[3:]))  # line 3 removed
    assert moved(git_, first, gone, "a.txt", 3) == (True, None)
    assert moved(git_, first, gone, "a.txt", 4) == (False, 5)
    changed = commit("".join(lines[:2]) + "line three\n" + "".join(lines[3:]))
    assert moved(git_, first, changed, "a.txt", 3) == (True, None)
    assert moved(git_, first, changed, "a.txt", 2) == (False, 2)
    assert moved(git_, first, first, "a.txt", 3) == (False, 3)
    git(repo, "rm", "-q", "a.txt")
    git(repo, "commit", "-qm", "rm")
    assert moved(git_, first, git(repo, "rev-parse", "HEAD").strip(), "a.txt", 1) == (True, None)
    # the lines a comment may be on: added and context lines of the diff, by path
    shown = diff_lines(git_, f"{first}..{changed}", ["a.txt"])
    assert shown == {"a.txt": {1, 2, 3, 4, 5, 6}}


def test_a_persons_review_says_who_and_every_finding_blocks() -> None:
    from cairn.run import review

    asked = review.Review(
        ticket="T-1",
        round=2,
        by="ann lee",
        findings=[review.ReviewFinding(id="R1", title="x", location="a.py:3", details="why")],
    )
    text = review.render(asked)
    assert text.splitlines()[0] == "# Review — ticket T-1, round 2 (by ann lee)"
    assert review.parse(text, "r.md") == asked
    assert [f.id for f in asked.blocking()] == ["R1"] == [f.id for f in asked.to_fix()]
    theirs = review.parse(review.render(review.Review(ticket="T-1", round=1)), "r.md")
    assert theirs.by is None
    agents = review.Review(ticket="T-1", round=1, findings=asked.findings)
    assert agents.blocking() == [] and agents.to_fix() == []  # an agent's R is a suggestion

"""Refused queue entries are reported, never dropped (docs/fleet.md, "Refused entries").

The parametrized test is the bad-input corpus for queue entries (tests/corpus/README.md): each
hostile entry through the real ``cairn fleet start --once``, alone in the queue. It must be said
once on stderr with its reason and fix, as a ``ticket_refused`` event, as a ``refused`` row of
``cairn fleet status`` (+ ``--json``) with no supervisor running, and the run exits 2 having
started nothing. The other tests: a refused entry beside a ticket that runs, said once per
change by a supervisor that keeps polling, and on the dashboard.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cairn.fleet.dashboard.app import make_app
from fleet.fleet_setup import agent_env, finish, fleet_repo, supervisor, wait_for
from helpers import cairn, tree_state

PLAN = "## Task 1: Step 1\n\nDo step 1.\n"
BIG = 100 * 1024 * 1024


def lay(repo: Path, outside: Path, case: str) -> None:
    """Put the hostile entry of ``case`` in the queue."""
    queue = repo / "cairn-queue"
    queue.mkdir(exist_ok=True)
    if case == "name-not-an-id":
        (queue / "fix the login.md").write_text(PLAN)
    elif case == "dot-dot":
        (queue / "a..b.md").write_text(PLAN)
    elif case == "empty":
        (queue / "EMPTY-1.md").write_text("")
    elif case == "binary":
        (queue / "BIN-1.md").write_bytes(b"## Task 1: x\n\0\x01\x02\xff")
    elif case == "unparseable-yaml":
        (queue / "YAML-1.yaml").write_text("tasks: [unclosed\n")
    elif case == "prose-without-tasks":
        (queue / "PROSE-1.md").write_text("Please fix the login page, thanks.\n")
    elif case == "100-mb":
        with (queue / "BIG-1.md").open("wb") as handle:  # sparse: never read, only stated
            handle.truncate(BIG)
    elif case == "symlink-outside":
        (outside / "secret.md").write_text(PLAN)
        (queue / "OUT-1.md").symlink_to(outside / "secret.md")
    elif case == "dangling-symlink":
        (queue / "GONE-1.md").symlink_to(outside / "nothing.md")
    elif case == "fifo":
        os.mkfifo(queue / "FIFO-1.md")  # opened, it would hang the poll
    elif case == "directory":
        (queue / "DIR-1.md").mkdir()
    elif case == "bad-front-matter-ticket":
        (queue / "front.md").write_text(f"---\nticket: ../../etc\n---\n{PLAN}")
    else:
        raise AssertionError(case)


CASES = {  # case → (a fragment of the reason, the plan it names, the ticket it would be)
    "name-not-an-id": ("rename it fix-the-login.md", "cairn-queue/fix the login.md", None),
    "dot-dot": ("is not a ticket id (it contains '..')", "cairn-queue/a..b.md", None),
    "empty": ("no tasks found", "cairn-queue/EMPTY-1.md", "EMPTY-1"),
    "binary": ("the plan is binary, not text", "cairn-queue/BIN-1.md", "BIN-1"),
    "unparseable-yaml": ("cairn-queue/YAML-1.yaml", "cairn-queue/YAML-1.yaml", "YAML-1"),
    "prose-without-tasks": ("no tasks found", "cairn-queue/PROSE-1.md", "PROSE-1"),
    "100-mb": ("over the 4194304 byte limit of a plan", "cairn-queue/BIG-1.md", "BIG-1"),
    "symlink-outside": ("outside the repository", "cairn-queue/OUT-1.md", None),
    "dangling-symlink": ("is a link to nothing", "cairn-queue/GONE-1.md", None),
    "fifo": ("is not a regular file", "cairn-queue/FIFO-1.md", None),
    "directory": ("is a directory", "cairn-queue/DIR-1.md", None),
    "bad-front-matter-ticket": ("invalid ticket id '../../etc'", "cairn-queue/front.md", "front"),
}


def refused_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("cairn: warning: refused: ")]


def events(stdout: str, kind: str) -> list[dict[str, Any]]:
    found = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return [event for event in found if event["event"] == kind]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_queue_of_one_refused_entry_says_why_and_exits_2(tmp_path: Path, case: str) -> None:
    fragment, plan, ticket = CASES[case]
    repo = fleet_repo(tmp_path, {})
    outside = tmp_path / "outside"
    outside.mkdir()
    lay(repo, outside, case)
    outside_before, repo_before = tree_state(outside), tree_state(repo, {"cairn-queue"})
    result = subprocess.run(
        [sys.executable, "-m", "cairn", "fleet", "start", "--once", "--json"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,  # a FIFO opened would hang here
        check=False,
    )
    context = (result.returncode, result.stdout, result.stderr)
    assert result.returncode == 2, context
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, context
    # exactly one line on stderr: the refusal, with its reason and the fix
    (line,) = result.stderr.splitlines()
    assert line in refused_lines(result.stderr) and fragment in line and "; " in line, context
    (event,) = events(result.stdout, "ticket_refused")
    assert event["plan"] == plan and event["ticket"] == ticket and fragment in event["reason"]
    (finished,) = events(result.stdout, "fleet_finished")
    assert finished["exit_code"] == 2 and finished["refused"] == 1 and finished["tickets"] == {}
    assert events(result.stdout, "ticket_queued") == []
    assert not (tmp_path / "repo.cairn").exists()  # no worktree was made
    assert tree_state(outside) == outside_before
    assert tree_state(repo, {"cairn-queue"}) == repo_before
    # the summary line for people
    human = cairn("fleet", "start", "--once", cwd=repo)
    assert human.returncode == 2, (human.stdout, human.stderr)
    assert human.stdout.splitlines()[-1] == "fleet: 1 refused (exit 2)"
    assert len(refused_lines(human.stderr)) == 1
    # fleet status (no supervisor runs): a refused row with the plan and the reason
    rows = json.loads(cairn("fleet", "status", "--json", cwd=repo).stdout)
    (row,) = rows
    assert row["state"] == "refused" and row["plan"] == plan and row["ticket"] == ticket
    assert fragment in row["detail"] and row["attempt"] == 0 and row["worktree"] is None
    table = cairn("fleet", "status", cwd=repo)
    assert table.returncode == 0 and table.stderr == "", table
    label = ticket or plan
    assert any(
        line.split()[:1] == label.split()[:1] and "refused" in line
        for line in table.stdout.splitlines()[1:]
    ), table.stdout
    assert f"  {label}: " in table.stdout and fragment in table.stdout


def test_a_refused_entry_beside_a_ticket_that_runs(tmp_path: Path) -> None:
    """A duplicate ``ticket:`` is refused; the ticket completes; ``--once`` exits 1
    (something needs a person) with both in its summary."""
    repo = fleet_repo(tmp_path, {"A-1": 1})
    env = agent_env(tmp_path)
    (repo / "cairn-queue" / "dupe.md").write_text(f"---\nticket: A-1\n---\n{PLAN}")
    result = cairn("fleet", "start", "--once", cwd=repo, env=env)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stdout.splitlines()[-1] == "fleet: 1 completed, 1 refused (exit 1)"
    (line,) = refused_lines(result.stderr)
    assert "plan dupe.md names ticket 'A-1', as A-1.md does" in line
    rows = json.loads(cairn("fleet", "status", "--json", cwd=repo).stdout)
    assert [(r["ticket"], r["state"], r["plan"]) for r in rows] == [
        ("A-1", "completed", "cairn-queue/A-1.md"),
        ("A-1", "refused", "cairn-queue/dupe.md"),
    ]


def test_a_polling_supervisor_says_each_refusal_once_per_change(tmp_path: Path) -> None:
    repo = fleet_repo(tmp_path, {}, poll_interval="0.5s")
    queue = repo / "cairn-queue"
    queue.mkdir()
    bad = queue / "fix the login.md"
    bad.write_text(PLAN)
    proc = supervisor(repo, agent_env(tmp_path))
    try:
        status = repo / ".git" / "cairn" / "fleet" / "refused.json"
        wait_for(status.exists, what="the refused listing")
        first = status.stat().st_mtime_ns
        # while it runs, `fleet status` shows the row
        rows = json.loads(cairn("fleet", "status", "--json", cwd=repo).stdout)
        assert [(r["state"], r["plan"]) for r in rows] == [
            ("refused", "cairn-queue/fix the login.md")
        ]
        time.sleep(1.75)  # more polls (poll_interval 0.5s): nothing said again
        assert status.stat().st_mtime_ns == first  # nor written again
        before = json.loads(status.read_text())["refused"][0]["version"]
        bad.write_text(PLAN + "\n## Task 2: More\n")  # the entry changed: said again
        (queue / "PROJ-1.yaml").write_text("tasks: [")  # a new one: said

        def both_seen() -> bool:  # the listing is written after the poll's events
            listed = {r["plan"]: r for r in json.loads(status.read_text())["refused"]}
            login = listed.get("cairn-queue/fix the login.md")
            changed = login is not None and login["version"] != before
            return changed and "cairn-queue/PROJ-1.yaml" in listed

        wait_for(both_seen, what="a poll that sees both changes")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
    code, lines = finish(proc)
    assert code == 3
    said = [(e["plan"], e["ticket"]) for e in lines if e["event"] == "ticket_refused"]
    assert said == [
        ("cairn-queue/fix the login.md", None),
        ("cairn-queue/PROJ-1.yaml", "PROJ-1"),
        ("cairn-queue/fix the login.md", None),
    ] or said == [
        ("cairn-queue/fix the login.md", None),
        ("cairn-queue/fix the login.md", None),
        ("cairn-queue/PROJ-1.yaml", "PROJ-1"),
    ], said
    assert lines[-1]["event"] == "fleet_finished" and lines[-1]["refused"] == 2


def test_the_dashboard_shows_refused_rows(tmp_path: Path) -> None:
    repo = fleet_repo(tmp_path, {"A-1": 1})
    (repo / "cairn-queue" / "fix the login.md").write_text(PLAN)
    result = cairn("fleet", "start", "--once", cwd=repo, env=agent_env(tmp_path))
    assert result.returncode == 1, (result.stdout, result.stderr)
    with TestClient(make_app(repo, token=None), base_url="http://127.0.0.1") as client:
        state = client.get("/api/v1/state").json()
    assert state["counts"]["refused"] == 1 and state["counts"]["completed"] == 1
    refused = [row for row in state["tickets"] if row["state"] == "refused"]
    assert [(r["ticket"], r["plan"]) for r in refused] == [(None, "cairn-queue/fix the login.md")]
    assert "rename it fix-the-login.md" in refused[0]["detail"]
    assert set(refused[0]) >= {"ticket", "state", "plan", "detail", "updated", "attempt"}
    assert state["warnings"] == []


def test_a_tracker_that_fails_after_the_first_poll_is_a_warning(tmp_path: Path) -> None:
    """The queue turned into a file under a running supervisor: each poll warns, the last good
    list holds, and the supervisor lives on; a plan queued once the directory is back runs."""
    repo = fleet_repo(tmp_path, {"A-1": 1})
    queue = repo / "cairn-queue"
    records = repo / ".git" / "cairn" / "fleet" / "tickets"

    def completed(ticket: str) -> bool:
        path = records / f"{ticket}.json"
        return path.exists() and json.loads(path.read_text())["state"] == "completed"

    errors = tmp_path / "stderr.txt"
    with errors.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cairn", "fleet", "start", "--json"],
            cwd=repo,
            env={**os.environ, **agent_env(tmp_path)},
            stdout=subprocess.DEVNULL,
            stderr=sink,
            start_new_session=True,
        )

    def warned(times: int) -> bool:
        return errors.read_text().count("the tracker's poll failed") >= times

    try:
        wait_for(lambda: completed("A-1"), what="A-1 completed")  # polled once at least
        queue.rename(repo / "queue-aside")
        queue.write_text("not a directory\n")
        wait_for(lambda: warned(2), what="two polls of a queue that is a file")
        assert proc.poll() is None
        queue.unlink()
        (repo / "queue-aside").rename(queue)
        (queue / "B-1.md").write_text(PLAN)
        wait_for(lambda: completed("B-1"), what="B-1 completed")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)
    err = errors.read_text()
    assert proc.returncode == 3 and "Traceback" not in err, err
    warnings = [line for line in err.splitlines() if "the tracker's poll failed" in line]
    assert warnings and all("is not a directory" in line for line in warnings), err
    assert warnings[0].endswith("; the last list holds till the next poll")

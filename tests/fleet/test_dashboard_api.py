"""The dashboard's JSON API: every endpoint and its error shape in-process (Starlette's
TestClient over a repository a real ``cairn fleet start --once`` ran), the token, and the real
Uvicorn server behind ``cairn fleet dashboard`` and ``cairn fleet start --port``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest
from starlette.testclient import TestClient

from cairn.fleet import fleetstate
from cairn.fleet.dashboard.app import make_app
from cairn.fleet.supervisor import Supervisor
from cairn.state.layout import discover
from cairn.terms import ENV_DASHBOARD_TOKEN
from cairn.util import clock
from fleet.dashboard_setup import LOCAL, put_record, serve, started_url
from fleet.fleet_setup import agent_env, fleet_repo, wait_for
from helpers import assert_one_line_error, cairn, git, save

AGES = ("snapshot_age_seconds", "last_event_age_seconds")


def assert_error(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == code
    assert body["error"]["message"]


@pytest.fixture
def ran(tmp_path: Path) -> Path:
    """A repository whose queue a real supervisor ran: DONE-1 completed (two tasks, two
    commits on its branch) with a snapshot of an uncommitted file in its worktree, plus a
    retrying record written by hand."""
    repo = fleet_repo(tmp_path, {"DONE-1": 2})
    env = agent_env(tmp_path)
    result = cairn("fleet", "start", "--once", "--json", cwd=repo, env=env)
    assert result.returncode == 0, (result.stdout, result.stderr)
    worktree = Path(json.loads(cairn("fleet", "status", "--json", cwd=repo).stdout)[0]["worktree"])
    (worktree / "notes.txt").write_text("not committed yet\n")
    save(worktree, "DONE-1")  # what the agent has not committed: the snapshot diff
    put_record(
        repo,
        "RETRY-2",
        "retrying",
        attempt=1,
        next_attempt_at=clock.now() + timedelta(seconds=40),
        last_exit=3,
        last_reason="stall",
        detail="no progress for 5s",
    )
    return repo


def test_every_endpoint_over_a_real_fleet_run(ran: Path) -> None:
    client = TestClient(make_app(ran, token=None), base_url=LOCAL)

    state = client.get("/api/v1/state")
    assert state.status_code == 200
    assert state.headers["content-type"] == "application/json"
    body = state.json()
    assert set(body) >= {
        "generated_at",
        "supervisor",
        "agents",
        "usage",
        "next_poll_at",
        "counts",
        "tickets",
    }
    assert body["supervisor"] == {"running": False, "pid": None}
    assert body["agents"] == {"running": 0, "max": 3}
    assert body["next_poll_at"] is None
    assert body["counts"]["completed"] == 1 and body["counts"]["retrying"] == 1
    assert sum(body["counts"].values()) == 2
    assert set(body["usage"]) == {"total_tokens", "cost_usd"}

    # the rows are `cairn fleet status --json`'s, plus usage, the retrying row's last error and
    # the actions its buttons can take
    status = json.loads(cairn("fleet", "status", "--json", cwd=ran).stdout)
    rows = {row["ticket"]: row for row in body["tickets"]}
    for expected in status:
        row = dict(rows[expected["ticket"]])
        assert "usage" in row
        assert isinstance(row["actions"], list)
        for key in ("usage", "last_error", "actions", *AGES):  # ages: a second may pass in between
            row.pop(key, None)
        assert row == {k: v for k, v in expected.items() if k not in AGES}
    assert rows["RETRY-2"]["last_error"] == "no progress for 5s"
    assert rows["RETRY-2"]["next_attempt_at"] is not None
    assert "last_error" not in rows["DONE-1"]

    page = client.get("/api/v1/tickets/DONE-1")
    assert page.status_code == 200
    ticket = page.json()
    assert ticket["ticket"]["ticket"] == "DONE-1" and ticket["ticket"]["state"] == "completed"
    assert "## Status" in ticket["summary"] and "Completed" in ticket["summary"]
    assert "+DONE-1 task 1" in ticket["branch_diff"]
    assert "+DONE-1 task 2" in ticket["branch_diff"]
    assert 0 < len(ticket["journal"]) <= 50
    assert ticket["journal"][-1]["event"]
    assert ticket["snapshots"], "the run snapshots its worktree"
    for snap in ticket["snapshots"]:
        assert set(snap) >= {"ref", "commit", "age_seconds", "reason", "inspect"}
        for command in snap["inspect"]:
            if command.startswith("git "):  # each command works as printed
                git(ran, *command.split()[1:])
    assert "+not committed yet" in ticket["snapshot_diff"]
    assert "DONE-1 task" not in ticket["snapshot_diff"]

    assert_error(client.get("/api/v1/tickets/NOPE-9"), 404, "unknown_ticket")
    assert_error(client.get("/api/v1/tickets/no%20such"), 400, "invalid_ticket")
    assert_error(client.post("/api/v1/refresh"), 409, "no_supervisor")
    assert_error(client.get("/api/v1/nothing"), 404, "not_found")
    assert_error(client.delete("/api/v1/state"), 405, "method_not_allowed")
    assert_error(
        client.get("/api/v1/state", headers={"host": "evil.example"}), 403, "forbidden_host"
    )

    for path in ("/", "/tickets/DONE-1"):
        html = client.get(path)
        assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    assert client.get("/static/index.html").status_code == 200


def test_the_state_follows_the_files_without_a_restart(ran: Path) -> None:
    """The row cache reads a ticket again when its files change, and forgets a removed one."""
    client = TestClient(make_app(ran, token=None), base_url=LOCAL)
    first = {r["ticket"]: r for r in client.get("/api/v1/state").json()["tickets"]}
    assert first["RETRY-2"]["state"] == "retrying"
    put_record(ran, "RETRY-2", "failed", attempt=1, detail="hook before_run failed")
    put_record(ran, "NEW-3", "queued")
    again = {r["ticket"]: r for r in client.get("/api/v1/state").json()["tickets"]}
    assert again["RETRY-2"]["state"] == "failed"
    assert again["RETRY-2"]["detail"] == "hook before_run failed"
    assert "last_error" not in again["RETRY-2"]
    assert again["NEW-3"]["state"] == "queued"
    _, _, layout = discover(ran)
    fleetstate.remove(layout, "NEW-3")
    assert "NEW-3" not in {r["ticket"] for r in client.get("/api/v1/state").json()["tickets"]}


def test_needs_you_lists_what_needs_a_person_oldest_first(repo: Path) -> None:
    """``needs_you``: the tickets a person must act on, oldest first, with what to do; a
    completed, a queued or a paused ticket is not there. An answer to a ticket not waiting for
    input is 409, a bad body 400."""
    now = clock.now()

    def ago(seconds: int) -> datetime:
        return now - timedelta(seconds=seconds)

    question = "which endpoint should I call?"
    put_record(repo, "FAIL-1", "failed", ago(60), attempt=3, detail="hook before_run failed")
    put_record(repo, "ASK-2", "needs_input", ago(300), attempt=1, detail=question)
    put_record(repo, "REVIEW-3", "needs_review", ago(120), attempt=1)
    put_record(repo, "DONE-4", "completed", ago(900), attempt=1)
    put_record(repo, "NEW-5", "queued", ago(1000))
    put_record(repo, "PAUSED-6", "paused", ago(1100), attempt=1)
    client = TestClient(make_app(repo, token=None), base_url=LOCAL)

    needs = client.get("/api/v1/state").json()["needs_you"]

    assert [(n["ticket"], n["state"]) for n in needs] == [
        ("ASK-2", "needs_input"),
        ("REVIEW-3", "needs_review"),
        ("FAIL-1", "failed"),
    ]
    ask, _, fail = needs
    assert set(ask) == {"ticket", "state", "since", "waited_s", "detail", "to_do"}
    assert ask["detail"] == question and 300 <= ask["waited_s"] < 330
    assert ask["to_do"] == 'answer in cairn: cairn answer ASK-2 "…" / cairn resume ASK-2'
    assert fail["to_do"] == "see why: cairn catchup FAIL-1, then cairn fleet retry FAIL-1"
    headers = {"Origin": LOCAL}
    answer = client.post("/api/v1/tickets/FAIL-1/answer", json={"text": "x"}, headers=headers)
    assert_error(answer, 409, "not_applicable")
    for body in ({}, {"text": 3}, {"text": "x", "by": 1}, [1]):
        bad = client.post("/api/v1/tickets/ASK-2/answer", json=body, headers=headers)
        assert_error(bad, 400, "invalid_answer")
    unchanged = fleetstate.read(discover(repo)[2], "ASK-2")
    assert unchanged is not None and unchanged.state == "needs_input"


def test_with_a_token_every_request_needs_it(repo: Path) -> None:
    put_record(repo, "T-1", "queued")
    client = TestClient(make_app(repo, token="s3cret"), base_url="http://10.1.2.3")
    for path in ("/api/v1/state", "/api/v1/tickets/T-1", "/", "/static/index.html"):
        response = client.get(path)
        assert_error(response, 401, "unauthorized")
        assert response.headers["www-authenticate"] == "Bearer"
    assert_error(client.post("/api/v1/refresh"), 401, "unauthorized")
    wrong = {"Authorization": "Bearer nope"}
    assert_error(client.get("/api/v1/state", headers=wrong), 401, "unauthorized")

    bearer = {"Authorization": "Bearer s3cret"}
    assert client.get("/api/v1/state", headers=bearer).status_code == 200
    assert client.get("/api/v1/tickets/T-1", headers=bearer).status_code == 200
    # ?token= on the page sets a cookie, so the page's own assets load with it
    page = client.get("/?token=s3cret")
    assert page.status_code == 200
    assert "cairn_dashboard_token=s3cret" in page.headers["set-cookie"]
    assert "HttpOnly" in page.headers["set-cookie"]
    assert client.get("/static/index.html").status_code == 200  # the cookie
    client.cookies.clear()
    assert_error(client.get("/static/index.html"), 401, "unauthorized")


def test_refresh_asks_the_supervisor_to_poll_now(repo: Path) -> None:
    supervisor = Supervisor(repo)
    client = TestClient(make_app(repo, supervisor=supervisor, token=None), base_url=LOCAL)
    # a poll is due already (the supervisor has not polled yet): the request joins it
    answer = client.post("/api/v1/refresh")
    assert answer.status_code == 202 and answer.json() == {"queued": True, "coalesced": True}
    supervisor.next_poll = time.monotonic() + 300
    supervisor.wake.clear()
    answer = client.post("/api/v1/refresh")
    assert answer.json() == {"queued": True, "coalesced": False}
    assert supervisor.next_poll == 0.0 and supervisor.wake.is_set()
    state = client.get("/api/v1/state").json()
    assert state["supervisor"] == {"running": True, "pid": os.getpid()}
    assert state["next_poll_at"] is not None
    other = {"Origin": "http://evil.example"}
    assert_error(client.post("/api/v1/refresh", headers=other), 403, "forbidden_origin")


# --- the real server ------------------------------------------------------------------------


def test_cairn_fleet_dashboard_serves_the_api_on_loopback(ran: Path) -> None:
    proc = serve(["dashboard", "--port", "0", "--json"], ran)
    try:
        url = started_url(proc)
        assert url.startswith("http://127.0.0.1:")
        state = httpx2.get(url + "api/v1/state", timeout=10)
        assert state.status_code == 200
        assert {r["ticket"] for r in state.json()["tickets"]} == {"DONE-1", "RETRY-2"}
        assert httpx2.get(url + "api/v1/tickets/DONE-1", timeout=10).json()["summary"]
        assert_error(httpx2.post(url + "api/v1/refresh", timeout=10), 409, "no_supervisor")
        assert httpx2.get(url, timeout=10).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_a_non_loopback_bind_needs_the_token(repo: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != ENV_DASHBOARD_TOKEN}
    for args in (
        ["dashboard", "--host", "0.0.0.0", "--port", "0"],
        ["start", "--host", "0.0.0.0", "--port", "0"],
    ):
        result = subprocess.run(
            [sys.executable, "-m", "cairn", "fleet", *args],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert_one_line_error(result, 2)  # type: ignore[arg-type]
        assert ENV_DASHBOARD_TOKEN in result.stderr
    assert not (repo / ".git" / "cairn" / "fleet").exists(), "nothing written"

    # with the token it serves, and asks for it
    proc = serve(
        ["dashboard", "--host", "0.0.0.0", "--port", "0", "--json"],
        repo,
        {ENV_DASHBOARD_TOKEN: "s3cret"},
    )
    try:
        port = started_url(proc).rsplit(":", 1)[1].strip("/")
        local = f"http://127.0.0.1:{port}/api/v1/state"
        assert_error(httpx2.get(local, timeout=10), 401, "unauthorized")
        good = httpx2.get(local, headers={"Authorization": "Bearer s3cret"}, timeout=10)
        assert good.status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=20)


def test_a_taken_port_is_one_error_line(repo: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cairn("fleet", "dashboard", "--port", str(port), cwd=repo)
    assert_one_line_error(result, 2)
    assert "choose another --port" in result.stderr


def test_fleet_start_with_a_port_polls_the_tracker_on_refresh(tmp_path: Path) -> None:
    """With an hour between polls, a plan added to the queue starts at once when the page asks
    for a refresh: the supervisor's loop polls on the next tick."""
    repo = fleet_repo(tmp_path, {}, poll_interval="1h")
    (repo / "cairn-queue").mkdir(exist_ok=True)
    env = agent_env(tmp_path)
    proc = serve(["start", "--port", "0", "--json"], repo, env)
    try:
        url = started_url(proc)
        state = httpx2.get(url + "api/v1/state", timeout=10).json()
        assert state["supervisor"]["running"] is True and state["tickets"] == []
        (repo / "cairn-queue" / "LATE-1.md").write_text(
            "# Plan: LATE-1\n\n### Task 1: Step 1\n\nDo step 1.\n"
        )
        answer = httpx2.post(url + "api/v1/refresh", timeout=10)
        assert answer.status_code == 202 and answer.json()["queued"] is True

        def completed() -> bool:
            tickets = httpx2.get(url + "api/v1/state", timeout=10).json()["tickets"]
            return [t["state"] for t in tickets] == ["completed"]

        wait_for(completed, timeout=60, what="LATE-1 completed after the refresh")
    finally:
        cairn("fleet", "stop", cwd=repo)
        _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err

"""`cairn fleet status` and the dashboard on the temporal engine: the rows come from the ticket
workflows (memo, query, the running segment's heartbeat), not from local files, and still
answer when no worker is left."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2

from helpers import assert_one_line_error, cairn, git, untouched_state
from scale import temporal_server
from scale.scale_setup import (
    agent_env,
    agent_log,
    dashboard,
    shared_repo,
    start_worker,
    status_rows,
    wait_for,
)


def test_finished_tickets_and_the_dashboard(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    user = shared_repo(tmp_path, temporal.address, {"A-1": 2, "B-1": 1})
    (user / "cairn-queue" / "C-1.md").write_text("")  # refused: an empty plan
    env = agent_env(tmp_path)
    worker = start_worker(user, tmp_path / "w1", env)
    try:
        result = cairn("fleet", "start", "--once", "--json", "--port", "0", cwd=user, env=env)
        # every ticket completed, beside a refused entry: 1, as on the embedded engine
        assert result.returncode == 1, (result.stdout, result.stderr)
        first = json.loads(result.stdout.splitlines()[0])  # the dashboard beside the start
        assert first["event"] == "dashboard_started" and first["read_only"] is False
        said = [json.loads(line) for line in result.stdout.splitlines()]
        assert said[-1]["event"] == "fleet_finished" and said[-1]["refused"] == 1
        refused = [e for e in said if e["event"] == "ticket_refused"]
        assert [e["ticket"] for e in refused] == ["C-1"]
        assert "no tasks found" in refused[0]["reason"]
    finally:
        worker.stop()
    bare = tmp_path / "shared.git"
    rows, _ = status_rows(user, env)
    assert set(rows) == {"A-1", "B-1", "C-1"}
    gone = rows.pop("C-1")  # the starter's refusal is a row too, with why and the fix
    assert gone["state"] == "refused" and gone["plan"] and "no tasks found" in gone["detail"]
    assert gone["engine"] == "temporal" and gone["workflow_id"] is None
    for ticket, row in rows.items():
        tip = git(bare, "rev-parse", f"cairn/{ticket}").strip()
        assert row["state"] == "completed" and row["engine"] == "temporal"
        assert row["segments"] == 1 and row["branch"] == f"cairn/{ticket}"
        assert row["branch_sha"] == tip[:10]
        assert row["started_at"] and row["closed_at"] and row["worker"] is None
    # the run's one-line outcome, not the tail of its --json line
    assert rows["A-1"]["detail"] == "completed: 2 of 2 tasks"
    table = cairn("fleet", "status", cwd=user, env=env)
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split() == [
        "ticket",
        "state",
        "phase",
        "task",
        "attempt",
        "segments",
        "snapshot",
        "branch",
        "worker",
        "last",
    ]
    assert "A-1" in table.stdout and "completed" in table.stdout
    assert any(line.split()[:2] == ["C-1", "refused"] for line in table.stdout.splitlines())
    assert f"  C-1: {gone['detail']}" in table.stdout

    with dashboard(user, env) as url:
        state = httpx2.get(f"{url}/api/v1/state").json()
        assert {r["ticket"]: r["state"] for r in state["tickets"]} == {
            "A-1": "completed",
            "B-1": "completed",
            "C-1": "refused",
        }
        assert state["counts"]["completed"] == 2 and state["supervisor"]["engine"] == "temporal"
        page = httpx2.get(f"{url}/api/v1/tickets/A-1").json()
        assert page["ticket"]["state"] == "completed"
        assert "work/A-1-task-2.txt" in page["branch_diff"]  # from the shared remote's refs
        assert page["summary"] and page["journal"]  # the run directory from the state ref
        refreshed = httpx2.post(f"{url}/api/v1/refresh", headers={"Origin": url})
        assert refreshed.status_code == 202
        missing = httpx2.get(f"{url}/api/v1/tickets/NOPE-1")
        assert missing.status_code == 404


def test_a_running_ticket_and_then_no_worker(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    ticket = "R-1"
    user = shared_repo(tmp_path, temporal.address, {ticket: 3}, heartbeat="3s")
    env = agent_env(tmp_path, SCALE_AGENT_SLEEP=f"{ticket}:2", SCALE_AGENT_PAUSE="600")
    worker = start_worker(user, tmp_path / "w1", env)
    fleet = subprocess.Popen(
        [sys.executable, "-m", "cairn", "fleet", "start", "--once", "--json"],
        cwd=user,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def log() -> list[dict[str, Any]]:
            return agent_log(env, ticket)

        wait_for("the agent to sleep", lambda: any(e["event"] == "sleep" for e in log()))

        def in_task_2() -> dict[str, Any] | None:
            row = status_rows(user, env)[0][ticket]
            return row if row["task"] == 2 else None

        row = wait_for("the heartbeat of task 2", in_task_2)
        assert row["state"] == "running" and row["attempt"] == 1
        assert row["worker"] == f"{socket.gethostname()}:{worker.process.pid}"
        assert row["phase"] and row["snapshot"] and row["last_event"] == "heartbeat"
        with dashboard(user, env) as url:
            state = httpx2.get(f"{url}/api/v1/state").json()
            assert [(r["ticket"], r["state"]) for r in state["tickets"]] == [(ticket, "running")]
            assert state["agents"]["running"] == 1

        worker.kill()  # no worker left to answer a query
        started = time.monotonic()
        rows, warnings = status_rows(user, env)
        took = time.monotonic() - started
        # its segment runs until the heartbeat timeout, then waits for a retry (no worker)
        assert rows[ticket]["state"] in ("running", "retrying") and rows[ticket]["task"] == 2
        assert "no worker answered the status query" in warnings
        assert took < 15
    finally:
        fleet.kill()
        fleet.wait()
        worker.stop()


def test_temporal_unreachable_is_one_line_exit_2(tmp_path: Path) -> None:
    user = shared_repo(tmp_path, f"127.0.0.1:{temporal_server.free_port()}", {"A-1": 1})
    before = untouched_state(user)
    for command in (("fleet", "status"), ("fleet", "dashboard", "--port", "0")):
        result = cairn(*command, cwd=user)
        assert_one_line_error(result)
        assert "cannot reach Temporal at 127.0.0.1:" in result.stderr
    as_json = cairn("fleet", "status", "--json", cwd=user)
    assert as_json.returncode == 2 and not as_json.stderr
    assert "cannot reach Temporal at 127.0.0.1:" in json.loads(as_json.stdout)["error"]["message"]
    assert untouched_state(user) == before


def test_once_exit_codes_match_the_embedded_engine() -> None:
    from cairn.scale.starter import exit_code

    assert exit_code({"A-1": "completed"}) == 0
    assert exit_code({"A-1": "completed"}, refused=1) == 1
    assert exit_code({}, refused=2) == 2  # a queue of refused entries only is bad input
    assert exit_code({"A-1": "failed"}, refused=1) == 1
    assert exit_code({"A-1": "stopped", "B-1": "completed"}, refused=1) == 3

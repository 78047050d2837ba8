"""``cairn fleet pause|resume|stop TICKET`` on the temporal engine, end to end: a paused
ticket's run stops with its snapshot pushed and continues on resume; a stopped ticket's
workflow ends cancelled with its snapshot on the remote, and the next ``fleet start``
continues it without redoing a completed task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2

from cairn.util import procs
from helpers import CliResult, assert_one_line_error, cairn, git, untouched_state
from scale import temporal_server
from scale.scale_setup import (
    agent_env,
    agent_log,
    dashboard,
    events,
    shared_repo,
    start_worker,
    wait_for,
)


def asleep(env: dict[str, str], ticket: str) -> dict[str, Any]:
    found: dict[str, Any] = wait_for(
        f"{ticket}'s agent to sleep",
        lambda: [e for e in agent_log(env, ticket) if e["event"] == "sleep"],
    )[0]
    return found


def gone(pid: int) -> bool:
    return not procs.pid_alive(pid)


def snapshot_files(bare: Path, ticket: str) -> list[str]:
    return git(bare, "ls-tree", "-r", "--name-only", f"refs/cairn/wip/{ticket}").split()


def one_event(result: CliResult) -> dict[str, Any]:
    assert result.returncode == 0, (result.stdout, result.stderr)
    (event,) = events(result.stdout)
    return event


def test_pause_resume_and_stop_a_ticket(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    user = shared_repo(tmp_path, temporal.address, {"P-1": 3, "S-1": 3})
    bare = tmp_path / "shared.git"
    env = agent_env(tmp_path, SCALE_AGENT_SLEEP="P-1:2,S-1:2", SCALE_AGENT_PAUSE="600")
    worker = start_worker(user, tmp_path / "w1", env)
    fleet = subprocess.Popen(
        [sys.executable, "-m", "cairn", "fleet", "start", "--once", "--json"],
        cwd=user,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        paused_agent, stopped_agent = asleep(env, "P-1"), asleep(env, "S-1")

        with dashboard(user, env) as url:  # the dashboard's button: the same pause
            state = httpx2.get(f"{url}/api/v1/state").json()
            assert {r["ticket"]: r["actions"] for r in state["tickets"]}["P-1"] == [
                "pause",
                "stop",
            ]
            asked = httpx2.post(f"{url}/api/v1/tickets/P-1/pause", headers={"Origin": url})
            assert asked.status_code == 202, asked.text
            assert (asked.json()["changed"], asked.json()["by"]) == (True, "dashboard")
            unknown = httpx2.post(f"{url}/api/v1/tickets/NOPE-1/pause")
            assert unknown.status_code == 404
            assert unknown.json()["error"]["code"] == "unknown_ticket"

        def paused() -> bool:
            shown = cairn("fleet", "status", "--json", cwd=user, env=env)
            return any(r["state"] == "paused" for r in json.loads(shown.stdout or "[]"))

        wait_for("P-1 paused", paused)
        again = one_event(cairn("fleet", "pause", "P-1", "--json", cwd=user, env=env))
        assert (again["event"], again["state"]) == ("ticket_unchanged", "paused")
        assert gone(paused_agent["pid"])
        assert "work/P-1-task-2.txt" in snapshot_files(bare, "P-1")

        stopped = one_event(cairn("fleet", "stop", "S-1", "--json", cwd=user, env=env))
        assert (stopped["event"], stopped["state"]) == ("ticket_stop", "stopped")
        assert gone(stopped_agent["pid"])
        assert "work/S-1-task-2.txt" in snapshot_files(bare, "S-1")
        wip = git(bare, "rev-parse", "refs/cairn/wip/S-1").strip()
        assert stopped["snapshot"] == wip[:12]

        shown = cairn("fleet", "status", "--json", cwd=user, env=env)
        assert shown.returncode == 0, shown.stderr
        rows = {row["ticket"]: row["state"] for row in json.loads(shown.stdout)}
        assert rows == {"P-1": "paused", "S-1": "stopped"}

        with dashboard(user, env) as url:
            page = httpx2.get(f"{url}/api/v1/tickets/P-1").json()
            assert page["actions"]["pause"] == "ticket P-1 is paused already"
            asks = [(e["action"], e["by"]) for e in page["journal"] if e["event"] == "asked"]
            assert asks == [("pause", "dashboard")]
            resumed = httpx2.post(f"{url}/api/v1/tickets/P-1/resume")
            assert resumed.status_code == 202 and resumed.json()["by"] == "api", resumed.text
            stop_s1 = httpx2.post(f"{url}/api/v1/tickets/S-1/stop")
            assert stop_s1.status_code == 409, stop_s1.text  # its workflow has ended
            assert stop_s1.json()["error"]["code"] == "not_applicable"
        out, err = fleet.communicate(timeout=120)
        assert fleet.returncode == 3, (out, err)  # S-1 stopped: resumable
        assert events(out)[-1]["tickets"] == {"P-1": "completed", "S-1": "stopped"}

        later = cairn("fleet", "start", "--once", "--json", cwd=user, env=env)
        assert later.returncode == 0, (later.stdout, later.stderr)
        seen = events(later.stdout)
        kinds = ("ticket_exists", "ticket_started")
        starts = {e["ticket"]: e["event"] for e in seen if e["event"] in kinds}
        assert starts.get("P-1") == "ticket_exists" and starts.get("S-1") == "ticket_started"
        assert seen[-1]["tickets"] == {"P-1": "completed", "S-1": "completed"}
    finally:
        if fleet.poll() is None:
            fleet.kill()
        worker.stop()

    for ticket in ("P-1", "S-1"):
        log = agent_log(env, ticket)
        assert [e["task"] for e in log if e["event"] == "done"] == [1, 2, 3]  # none redone
        (found,) = [e for e in log if e["event"] == "found"]
        assert found["task"] == 2  # the task-2 file came back from the pushed snapshot
        files = git(bare, "ls-tree", "-r", "--name-only", f"cairn/{ticket}").split()
        assert {f"work/{ticket}-task-{n}.txt" for n in (1, 2, 3)} <= set(files)
    # each cancelled attempt says one line in the worker's output, not a traceback
    said = (tmp_path / "w1.log").read_text()
    for ticket in ("P-1", "S-1"):
        assert f"cairn: {ticket}: attempt 1 cancelled: a pause or stop was asked" in said
    assert "Traceback" not in said and "CancelledError" not in said


def test_control_bad_input_is_one_line_exit_2(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    user = shared_repo(tmp_path, temporal.address, {"A-1": 1})
    before = untouched_state(user)
    unknown = cairn("fleet", "stop", "NOPE-1", cwd=user)
    assert_one_line_error(unknown)
    assert "ticket NOPE-1 has no workflow" in unknown.stderr
    as_json = cairn("fleet", "pause", "NOPE-1", "--json", cwd=user)
    assert as_json.returncode == 2
    assert "NOPE-1" in json.loads(as_json.stdout)["error"]["message"]
    # the embedded engine has its own tickets (its fleet records): none here
    embedded = cairn("fleet", "pause", "A-1", "--engine", "embedded", cwd=user)
    assert_one_line_error(embedded)
    assert "no fleet ticket A-1: the fleet has none yet" in embedded.stderr
    single = cairn("fleet", "stop", "A-1", "--engine", "embedded", cwd=user)
    assert_one_line_error(single)
    assert "no fleet ticket A-1" in single.stderr
    assert untouched_state(user) == before

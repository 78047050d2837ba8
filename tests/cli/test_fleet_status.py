"""``cairn fleet status`` and ``cairn status`` over fleet tickets: rows built from the fleet's
records and the real run state of real runs (the scripted agent), with no supervisor running;
the real CLI in subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from cairn.fleet import fleetstate
from cairn.fleet.fleetstate import FleetTicket
from cairn.fleet.fleetstatus import FleetRow, fleet_status
from cairn.state.layout import discover
from cairn.util.procs import process_start
from helpers import assert_one_line_error, cairn, make_repo, rev, scripted_project

HEAVY = ("typer", "click", "rich", "pydantic", "pydantic_core", "mcp")
DONE = {"coder": [[{"cairn": ["task", "done", "1"]}, {"cairn": ["task", "done", "2"]}]]}
FAILS = {
    "coder": [
        [
            {"write": {"path": "half.txt", "content": "half\n"}},
            {"cairn": ["task", "done", "1"]},
            {"fail": "API Error: 529 Overloaded"},
        ]
    ]
}
SLOW = {
    "coder": [
        [
            {"write": {"path": "wip.txt", "content": "half done\n"}},
            {"cairn": ["task", "done", "1"]},
            {"sleep": 60},
        ]
    ]
}


def record(repo: Path, ticket: str, state: Any, **fields: Any) -> None:
    _, _, layout = discover(repo)
    fields.setdefault("updated", datetime.now(UTC))
    fleetstate.write(
        layout, FleetTicket(ticket=ticket, plan=f"cairn-queue/{ticket}.md", state=state, **fields)
    )


def run(root: Path, repo: Path, plan: Path, ticket: str, script: dict[str, Any]) -> int:
    (root / "agent-script.yaml").write_text(json.dumps(script))
    return cairn("run", str(plan), "--ticket", ticket, cwd=repo).returncode


def in_dispatch_of_task_2(marker: Path) -> bool:
    try:
        data = yaml.safe_load(marker.read_text())
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and data.get("task") == 2 and bool(data.get("dispatch"))


def rows(repo: Path, **env: str) -> dict[str, dict[str, Any]]:
    result = cairn("fleet", "status", "--json", cwd=repo, env=env)
    assert result.returncode == 0, result.stderr
    return {row["ticket"]: row for row in json.loads(result.stdout)}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository with a ticket in every fleet state but running, over real runs."""
    root = tmp_path_factory.mktemp("fleet")
    repo, plan = scripted_project(root, DONE)
    assert run(root, repo, plan, "C-1", DONE) == 0
    for ticket in ("I-1", "Y-1", "N-1"):
        assert run(root, repo, plan, ticket, FAILS) == 3
    wt = str(root / "repo.cairn")
    soon = datetime.now(UTC) + timedelta(seconds=90)
    record(
        repo, "C-1", "completed", attempt=1, worktree=f"{wt}/C-1", branch="cairn/C-1", last_exit=0
    )
    record(
        repo,
        "I-1",
        "interrupted",
        attempt=3,
        last_exit=3,
        last_reason="error",
        detail="3 attempts used",
    )
    record(
        repo, "Y-1", "retrying", attempt=1, next_attempt_at=soon, last_exit=3, last_reason="error"
    )
    record(repo, "N-1", "needs_input", attempt=1, detail="the agent waits for a person")
    record(repo, "V-1", "needs_review", attempt=1, last_exit=1)
    record(repo, "F-1", "failed", detail="after_create hook failed: exit 1")
    record(repo, "Q-1", "queued")
    return repo


def test_one_row_per_ticket_in_each_state(fleet: Path) -> None:
    found = rows(fleet)
    assert {t: r["state"] for t, r in found.items()} == {
        "C-1": "completed",
        "F-1": "failed",
        "I-1": "interrupted",
        "N-1": "needs_input",
        "Q-1": "queued",
        "V-1": "needs_review",
        "Y-1": "retrying",
    }
    done = found["C-1"]
    assert (done["phase"], done["task"], done["total"], done["attempt"]) == ("done", 2, 2, 1)
    assert done["run_state"] == "done" and done["last_event"] == "run_finished"
    assert done["worktree"].endswith("repo.cairn/C-1") and done["branch"] == "cairn/C-1"
    cut = found["I-1"]
    assert cut["run_state"] == "interrupted" and cut["total"] == 2 and cut["attempt"] == 3
    assert cut["last_reason"] == "error" and cut["detail"] == "3 attempts used"
    assert cut["snapshot"] == rev(fleet, "refs/cairn/wip/I-1")[:10]
    assert 0 <= cut["snapshot_age_seconds"] < 600
    assert cut["last_event"] is not None and 0 <= cut["last_event_age_seconds"] < 600
    assert found["Y-1"]["next_attempt_at"].endswith("Z")
    for quiet in ("Q-1", "F-1", "V-1"):
        assert found[quiet]["run"] is None and found[quiet]["snapshot"] is None
    assert found["F-1"]["detail"] == "after_create hook failed: exit 1"


def test_text_table(fleet: Path) -> None:
    shown = cairn("fleet", "status", cwd=fleet)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == [
        "ticket",
        "state",
        "phase",
        "task",
        "attempt",
        "turns",
        "snapshot",
        "worktree",
        "last",
    ]
    done = next(line for line in lines if line.startswith("C-1 "))
    assert done.split()[:5] == ["C-1", "completed", "done", "2/2", "1/3"]
    assert "run_finished" in done
    cut = next(line for line in lines if line.startswith("I-1 ")).split()
    assert cut[:6] == ["I-1", "interrupted", "implement", "2/2", "3/3", "-"]
    assert cut[6] == rev(fleet, "refs/cairn/wip/I-1")[:7]
    assert "  F-1: after_create hook failed: exit 1" in lines
    (retry,) = [line for line in lines if line.startswith("  Y-1: ")]
    assert "next attempt in " in retry


def test_cairn_status_marks_fleet_tickets(fleet: Path) -> None:
    result = cairn("status", "--json", cwd=fleet)
    assert result.returncode == 0, result.stderr
    found = {row["ticket"]: row for row in json.loads(result.stdout)}
    assert found["C-1"]["state"] == "done" and found["C-1"]["fleet"] == "completed"
    assert found["I-1"]["state"] == "interrupted" and found["I-1"]["fleet"] == "interrupted"
    assert found["Q-1"]["state"] == "none" and found["Q-1"]["fleet"] == "queued"
    text = cairn("status", cwd=fleet).stdout.splitlines()
    assert text[0].split()[-1] == "fleet"
    assert next(line for line in text if line.startswith("N-1 ")).endswith("needs input")


def test_cairn_status_without_a_fleet_has_no_fleet_column(tmp_path: Path) -> None:
    repo, plan = scripted_project(tmp_path, DONE)
    assert cairn("run", str(plan), cwd=repo).returncode == 0
    text = cairn("status", cwd=repo).stdout.splitlines()
    assert text[0].split() == ["ticket", "state", "phase", "round", "task", "age", "owner"]
    (row,) = json.loads(cairn("status", "--json", cwd=repo).stdout)
    assert row["fleet"] is None
    assert json.loads(cairn("fleet", "status", "--json", cwd=repo).stdout) == []
    empty = cairn("fleet", "status", cwd=repo)
    assert empty.returncode == 0 and empty.stdout.startswith("no fleet tickets")


def test_a_broken_record_is_a_warning_not_a_failure(fleet: Path) -> None:
    path = fleet / ".git/cairn/fleet/tickets/B-1.json"
    path.write_text("{torn")
    try:
        result = cairn("fleet", "status", "--json", cwd=fleet)
        assert result.returncode == 0
        assert "B-1" not in {row["ticket"] for row in json.loads(result.stdout)}
        assert result.stderr.startswith("cairn: warning: fleet record ")
        assert "B-1.json is not valid JSON" in result.stderr and "Traceback" not in result.stderr
        status = cairn("status", cwd=fleet)
        assert status.returncode == 0 and "B-1.json" in status.stderr
    finally:
        path.unlink()


def test_a_running_ticket_then_its_owner_killed(tmp_path: Path) -> None:
    repo, plan = scripted_project(tmp_path, SLOW)
    child = subprocess.Popen(
        [sys.executable, "-m", "cairn", "run", str(plan), "--ticket", "R-1", "--json"],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        marker = repo / ".git/cairn/tickets/R-1/.in-progress.yaml"
        deadline = time.monotonic() + 30
        while not in_dispatch_of_task_2(marker):  # the marker is JSON, which YAML reads too
            assert time.monotonic() < deadline, "the run never dispatched task 2"
            time.sleep(0.05)
        started = process_start(child.pid)
        assert started is not None
        record(
            repo, "R-1", "running", attempt=1, pid=child.pid, pid_started_at=started.at.timestamp()
        )
        row = rows(repo)["R-1"]
        assert row["state"] == "running" and row["run_state"] == "in_progress"
        assert (row["phase"], row["task"], row["total"]) == ("implement", 2, 2)
        assert (row["turn"], row["max_turns"]) == (0, 5)
        assert row["pid"] == child.pid and row["last_event"] is not None
        line = next(
            x for x in cairn("fleet", "status", cwd=repo).stdout.splitlines() if x.startswith("R-1")
        )
        assert line.split()[:6] == ["R-1", "running", "implement", "2/2", "1/3", "0/5"]
        os.killpg(child.pid, signal.SIGKILL)  # the supervisor's child and its agent, killed
        child.wait(30)
        row = rows(repo)["R-1"]
        assert row["state"] == "interrupted" and row["pid"] is None
        assert "is gone; `cairn fleet start` resumes it" in row["detail"]
        assert row["run_state"] == "interrupted"
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


def test_in_process_report_matches(fleet: Path) -> None:
    rows, warnings = fleet_status(fleet)
    assert warnings == []
    assert [row["ticket"] for row in rows] == ["C-1", "F-1", "I-1", "N-1", "Q-1", "V-1", "Y-1"]
    assert all(list(row) == list(FleetRow.__struct_fields__) for row in rows)  # no dashboard keys


def test_fleet_status_outside_a_repository_is_one_line(tmp_path: Path) -> None:
    assert_one_line_error(cairn("fleet", "status", cwd=tmp_path))
    repo = make_repo(tmp_path / "plain")
    (repo / ".git/cairn").mkdir()
    (repo / ".git/cairn/fleet").write_text("not a directory")
    assert_one_line_error(cairn("fleet", "status", cwd=repo))


def test_fleet_status_imports_no_heavy_module(fleet: Path) -> None:
    """Like the hot commands of tests/test_imports.py: no Rich or pydantic, with
    records holding every field (times included) to read."""
    for args in (["fleet", "status", "--json"], ["fleet", "status"], ["status", "--json"]):
        result = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "cairn", *args],
            cwd=fleet,
            capture_output=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr.decode()[-2000:]
        lines = result.stderr.decode().splitlines()
        names = {ln.rsplit("|", 1)[1].strip() for ln in lines if ln.startswith("import time:")}
        assert "cairn.fleet.fleetstatus" in names or args[0] == "status"
        heavy = sorted(n for n in names if n.split(".")[0] in HEAVY)
        assert heavy == [], args

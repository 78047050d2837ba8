"""``cairn fleet start|stop`` end to end: real git worktrees, the real CLI as subprocesses, a
command agent (tests/fleet/fleet_agent.py) that does one task a turn and logs every task it
starts and finishes, so a task done twice shows."""

from __future__ import annotations

import json
import signal
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cairn.config.records import FleetConfig
from cairn.fleet import schedule
from cairn.fleet.fleetstate import FleetTicket
from fleet.fleet_setup import (
    FLEET_DEFAULTS,
    agent_env,
    agent_log,
    branch_holds_work,
    finish,
    fleet_repo,
    kill_everything,
    never_redone,
    record,
    supervisor,
    wait_for,
    wait_line,
)
from helpers import assert_one_line_error, cairn, git, make_repo

# --- the schedule (no processes) ----------------------------------------------------------------


def test_backoff_doubles_from_retry_backoff_up_to_its_cap() -> None:
    config = msgspec.convert({"retry_backoff": "10s", "retry_backoff_cap": "45s"}, FleetConfig)
    assert [schedule.backoff(config, n) for n in (1, 2, 3, 4, 5)] == [10, 20, 40, 45, 45]


def _ticket(**fields: Any) -> FleetTicket:
    base = {"ticket": "T-1", "plan": "cairn-queue/T-1.md", "state": "running", "attempt": 1}
    return msgspec.convert({**base, **fields, "updated": datetime.now().astimezone()}, FleetTicket)


@pytest.mark.parametrize(
    ("code", "reason", "needs_input", "attempt", "state"),
    [
        (0, None, False, 1, "completed"),
        (1, "needs_review", False, 1, "needs_review"),
        (2, None, False, 1, "failed"),
        (3, "incomplete", True, 1, "needs_input"),
        (3, "signal", False, 1, "interrupted"),
        (3, "max_turns", False, 1, "retrying"),
        (3, "stall", False, 2, "retrying"),
        (3, "max_turns", False, 3, "interrupted"),
        (None, "crash", False, 1, "retrying"),
    ],
)
def test_after_attempt(
    code: int | None, reason: str | None, needs_input: bool, attempt: int, state: str
) -> None:
    config = msgspec.convert({"retry_backoff": "10s", "max_attempts": 3}, FleetConfig)
    now = datetime.now().astimezone()
    verdict = schedule.after_attempt(
        config, _ticket(attempt=attempt), code, reason, None, needs_input, now
    )
    assert verdict.state == state
    if state == "retrying":
        assert verdict.next_attempt_at == now + timedelta(seconds=10 * 2 ** (attempt - 1))
    else:
        assert verdict.next_attempt_at is None


# --- whole fleets -------------------------------------------------------------------------------


@pytest.mark.slow
def test_once_completes_a_queue_with_a_stall_and_a_turn_cap(tmp_path: Path) -> None:
    plans = {"a": 2, "b": 2, "c": 2, "d": 2, "stall": 2, "turncap": 7}
    repo = fleet_repo(tmp_path, plans)
    env = agent_env(tmp_path, stall="stall")
    code, lines = finish(supervisor(repo, env, "--once", "--concurrency", "3"), timeout=300)
    assert code == 0, lines
    assert lines[-1]["event"] == "fleet_finished"
    assert lines[-1]["tickets"] == dict.fromkeys(sorted(plans), "completed")
    running = 0
    most = 0
    for line in lines:  # never more than 3 at once
        if line["event"] == "ticket_started":
            running += 1
        elif line["event"] in ("ticket_finished", "ticket_retrying"):
            running -= 1
        most = max(most, running)
    assert most == 3
    for ticket, tasks in plans.items():
        branch_holds_work(repo, ticket, tasks)
        never_redone(env, ticket)
    assert record(repo, "stall")["attempt"] == 2
    assert record(repo, "turncap")["attempt"] == 3
    assert record(repo, "a")["attempt"] == 1
    stalled = [e for e in lines if e["event"] == "ticket_retrying" and e["ticket"] == "stall"]
    assert [e["reason"] for e in stalled] == ["stall"]
    capped = [e for e in lines if e["event"] == "ticket_retrying" and e["ticket"] == "turncap"]
    assert [e["reason"] for e in capped] == ["max_turns", "max_turns"]
    journal = next((repo / ".git/cairn/tickets/stall").glob("*/run-log.jsonl")).read_text()
    assert '"event": "cutoff", "reason": "stall"' in journal
    summaries = (repo / ".git/cairn/tickets/stall").glob("*/*_orchestrator_run-summary.md")
    assert any("interrupted (stall)" in path.read_text() for path in summaries)
    # the worktrees live beside the repository; the main work tree never shows them
    assert (tmp_path / "repo.cairn" / "a").is_dir()
    assert "repo.cairn" not in git(repo, "status", "--porcelain", "--untracked-files=all")


@pytest.mark.slow
def test_sigkill_of_supervisor_and_agents_then_start_again_completes_everything(
    tmp_path: Path,
) -> None:
    plans = {"k1": 6, "k2": 6, "k3": 6}
    repo = fleet_repo(tmp_path, plans, max_turns=10)
    env = agent_env(tmp_path, slow="k1,k2,k3", pause="0.6")
    env["FLEET_AGENT_PAUSE"] = "0.6"
    proc = supervisor(repo, env, "--once")

    def some_work_done() -> bool:
        done = [sum(e["event"] == "done" for e in agent_log(env, t)) for t in plans]
        return all(n >= 1 for n in done)

    wait_for(some_work_done, what="tasks done before the kill")
    worktrees = {t: Path(record(repo, t)["worktree"]).stat().st_ino for t in plans}
    kill_everything(proc)
    assert all(record(repo, t)["state"] == "running" for t in plans)

    code, lines = finish(supervisor(repo, env, "--once"), timeout=300)
    assert code == 0, lines
    recovered = {e["ticket"] for e in lines if e["event"] == "ticket_recovered"}
    assert recovered == set(plans)
    started = [e for e in lines if e["event"] == "ticket_started"]
    assert {e["command"] for e in started} == {"resume"}
    for ticket, tasks in plans.items():
        assert record(repo, ticket)["state"] == "completed"
        never_redone(env, ticket)
        branch_holds_work(repo, ticket, tasks)
        # the orphaned worktree is reused, not recreated
        assert Path(record(repo, ticket)["worktree"]).stat().st_ino == worktrees[ticket]


def test_a_second_supervisor_is_refused_and_fleet_stop_stops_the_first(tmp_path: Path) -> None:
    repo = fleet_repo(tmp_path, {}, poll_interval="1m")
    env = agent_env(tmp_path)
    first = supervisor(repo, env)
    started = wait_line(first, "fleet_started")
    second = cairn("fleet", "start", "--once", cwd=repo, env=env)
    assert_one_line_error(second, 2)
    assert f"pid {started['pid']}" in second.stderr
    stopped = cairn("fleet", "stop", cwd=repo, env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert f"pid {started['pid']}" in stopped.stdout
    code, _ = finish(first, timeout=30)
    assert code == 3
    refused = cairn("fleet", "stop", cwd=repo, env=env)
    assert_one_line_error(refused, 2)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sigterm", "fleet stop"])
def test_graceful_stop_snapshots_every_running_ticket(tmp_path: Path, how: str) -> None:
    plans = {"g1": 3, "g2": 3}
    repo = fleet_repo(tmp_path, plans, max_turns=10)
    env = agent_env(tmp_path, slow="g1,g2", pause="30")
    env["FLEET_AGENT_PAUSE"] = "30"
    proc = supervisor(repo, env, "--once")
    wait_for(lambda: all(agent_log(env, t) for t in plans), what="both agents working")
    for ticket in plans:  # an uncommitted file the stop must save
        (Path(record(repo, ticket)["worktree"]) / "scratch.txt").write_text(f"{ticket} scratch\n")
    if how == "sigterm":
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)  # a second signal does not skip the snapshots
    else:
        assert cairn("fleet", "stop", cwd=repo, env=env).returncode == 0
    code, lines = finish(proc, timeout=60)
    assert code == 3, lines
    for ticket in plans:
        saved = record(repo, ticket)
        assert (saved["state"], saved["last_reason"], saved["attempt"]) == (
            "interrupted",
            "signal",
            0,
        )
        snap = git(repo, "show", f"refs/cairn/wip/{ticket}:scratch.txt")
        assert snap == f"{ticket} scratch\n"
        summary = next((repo / ".git/cairn/tickets" / ticket).glob("*/*_coder_change-summary.md"))
        assert "Interrupted — signal" in summary.read_text()
    # the next start resumes them first
    env.pop("FLEET_AGENT_SLOW")
    code, lines = finish(supervisor(repo, env, "--once"), timeout=120)
    assert code == 0, lines
    assert {e["command"] for e in lines if e["event"] == "ticket_started"} == {"resume"}
    for ticket, tasks in plans.items():
        branch_holds_work(repo, ticket, tasks)


@pytest.mark.slow
def test_backoff_schedule_survives_a_restart(tmp_path: Path) -> None:
    repo = fleet_repo(tmp_path, {"f1": 1}, retry_backoff="4s", max_attempts=2)
    env = agent_env(tmp_path, fail="f1")
    first = supervisor(repo, env, "--once")
    wait_line(first, "ticket_retrying")
    first.kill()  # SIGKILL: nothing but the record remembers the schedule
    first.wait()
    saved = record(repo, "f1")
    assert (saved["state"], saved["attempt"]) == ("retrying", 1)
    due = datetime.fromisoformat(saved["next_attempt_at"])
    code, lines = finish(supervisor(repo, env, "--once"), timeout=60)
    assert code == 3, lines
    failures = [e for e in agent_log(env, "f1") if e["event"] == "fail"]
    assert len(failures) == 2  # the restarted supervisor did attempt 2, not attempt 1 again
    assert failures[1]["t"] >= due.timestamp() - 0.01
    final = record(repo, "f1")
    assert (final["state"], final["attempt"]) == ("interrupted", 2)
    assert "2 of 2 attempts" in final["detail"]


def test_low_free_memory_holds_new_tickets_back(tmp_path: Path) -> None:
    repo = fleet_repo(tmp_path, {"m1": 1}, min_free_memory="1000TiB")
    env = agent_env(tmp_path)
    proc = supervisor(repo, env)
    waiting = wait_line(proc, "waiting")
    assert "fleet.min_free_memory" in waiting["message"]
    assert record(repo, "m1")["detail"].startswith("waiting: free memory")
    assert cairn("fleet", "stop", cwd=repo, env=env).returncode == 0
    code, _ = finish(proc, timeout=30)
    assert code == 3
    assert record(repo, "m1")["state"] == "queued"
    assert not agent_log(env, "m1")


def test_a_failing_after_create_hook_fails_the_ticket_not_the_fleet(tmp_path: Path) -> None:
    hooks = 'after_create = "test -e marker-h1 || { echo no deps here; exit 1; }"\n'
    repo = fleet_repo(tmp_path, {"h1": 1, "h2": 1}, hooks=hooks.replace("marker-h1", "README.md"))
    broken = fleet_repo(tmp_path / "other", {"h1": 1}, hooks=hooks)
    env = agent_env(tmp_path)
    code, lines = finish(supervisor(broken, env, "--once"), timeout=60)
    assert code == 1, lines
    failed = record(broken, "h1")
    assert failed["state"] == "failed"
    assert failed["detail"] == "hook after_create exited 1: no deps here"
    assert not agent_log(env, "h1")
    code, lines = finish(supervisor(repo, env, "--once"), timeout=60)
    assert code == 0, lines


def test_an_agent_stopped_by_denials_needs_input_and_is_not_retried(tmp_path: Path) -> None:
    """Needs input, not a stall: the agent was refused a tool call and stopped with its task
    open. The ticket is `needs_input` after one attempt, with the refusal named; no retry."""
    script = tmp_path / "script.yaml"
    script.write_text(
        "coder:\n"
        "  - - deny: {tool: Bash, target: 'curl -s https://example.com/api'}\n"
        "    - say: I need network access to go on\n"
    )
    config = (
        f'[agent]\nkind = "scripted"\nscript = "{script}"\nmax_turns = 3\n'
        "budget_pressure_turns = 1\nmax_continuations = 0\ncutoff_timeout_ms = 3000\n\n"
        '[loop]\nphases = ["implement"]\n\n[fleet]\n'
        + "".join(f"{k} = {json.dumps(v)}\n" for k, v in FLEET_DEFAULTS.items())
    )
    repo = make_repo(tmp_path / "repo", {"README.md": "hello\n", "cairn.toml": config})
    queued = repo / "cairn-queue" / "n1.md"
    queued.parent.mkdir()
    queued.write_text("# Plan: n1\n\n### Task 1: Call the API\n\nFetch it.\n")

    code, lines = finish(supervisor(repo, {}, "--once"), timeout=120)

    assert code == 1, lines
    saved = record(repo, "n1")
    assert (saved["state"], saved["attempt"]) == ("needs_input", 1), saved
    assert "curl -s https://example.com/api" in saved["detail"]
    assert [e["attempt"] for e in lines if e["event"] == "ticket_started"] == [1]

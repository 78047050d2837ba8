"""``cairn resume <fleet ticket>`` typed in the main work tree (issue 22, item 12): the run goes
on in the ticket's worktree on ``cairn/<ticket>``, the main work tree and ``main`` untouched,
and the fleet record follows, so ``cairn fleet status`` and ``cairn status`` agree."""

from __future__ import annotations

import json
from pathlib import Path

from fleet.fleet_setup import (
    agent_env,
    branch_holds_work,
    finish,
    fleet_repo,
    never_redone,
    record,
    supervisor,
    wait_line,
)
from helpers import assert_one_line_error, cairn, git


def statuses(repo: Path, env: dict[str, str], ticket: str) -> tuple[str, str, str]:
    """(fleet status's state, cairn status's run state, cairn status's fleet column)."""
    fleet = json.loads(cairn("fleet", "status", "--json", cwd=repo, env=env).stdout)
    (row,) = [r for r in fleet if r["ticket"] == ticket]
    status = json.loads(cairn("status", "--json", cwd=repo, env=env).stdout)
    (mine,) = [r for r in status if r["ticket"] == ticket]
    return row["state"], mine["state"], mine["fleet"]


def test_resume_from_the_main_work_tree_runs_in_the_tickets_worktree(tmp_path: Path) -> None:
    repo = fleet_repo(tmp_path, {"h1": 4}, max_turns=2, max_attempts=1)
    env = agent_env(tmp_path)
    code, _ = finish(supervisor(repo, env, "--once"), timeout=120)
    assert code == 3  # its one attempt did 2 of 4 tasks
    before = record(repo, "h1")
    assert before["state"] == "interrupted" and "cairn resume h1 continues it" in before["detail"]
    main_head = git(repo, "rev-parse", "HEAD")
    main_files = git(repo, "status", "--porcelain")

    result = cairn("resume", "h1", "--max-turns", "10", cwd=repo, env=env)

    assert result.returncode == 0, (result.stdout, result.stderr)
    assert git(repo, "rev-parse", "HEAD") == main_head  # nothing committed on main
    assert git(repo, "status", "--porcelain") == main_files
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    branch_holds_work(repo, "h1", 4)  # the agent worked on cairn/h1, in its worktree
    never_redone(env, "h1")
    after = record(repo, "h1")
    assert (after["state"], after["attempt"], after["pid"]) == ("completed", 2, None), after
    assert statuses(repo, env, "h1") == ("completed", "done", "completed")


def test_the_hint_works_for_a_ticket_whose_run_never_started(tmp_path: Path) -> None:
    repo = fleet_repo(tmp_path, {"h2": 2}, max_attempts=1, hooks='before_run = "exit 1"\n')
    env = agent_env(tmp_path)
    code, _ = finish(supervisor(repo, env, "--once"), timeout=60)
    assert code == 3
    hint = record(repo, "h2")["detail"]
    assert "cairn resume h2 continues it" in hint, hint
    assert not (repo / ".git/cairn/tickets/h2").exists()  # no run yet

    result = cairn("resume", "h2", cwd=repo, env=env)

    assert result.returncode == 0, (result.stdout, result.stderr)
    branch_holds_work(repo, "h2", 2)
    assert statuses(repo, env, "h2") == ("completed", "done", "completed")


def test_by_hand_while_the_fleet_runs_it_is_refused_until_it_is_paused(tmp_path: Path) -> None:
    repo = fleet_repo(tmp_path, {"h3": 4}, max_turns=2, retry_backoff="1h", retry_backoff_cap="2h")
    env = agent_env(tmp_path)
    proc = supervisor(repo, env)
    wait_line(proc, "ticket_retrying")  # the fleet resumes it in an hour
    refused = cairn("resume", "h3", cwd=repo, env=env)
    assert_one_line_error(refused)
    assert "runs ticket h3 itself; cairn fleet pause h3 first" in refused.stderr
    assert record(repo, "h3")["state"] == "retrying"

    assert cairn("fleet", "pause", "h3", cwd=repo, env=env).returncode == 0
    result = cairn("resume", "h3", "--max-turns", "10", cwd=repo, env=env)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert record(repo, "h3")["state"] == "completed"
    resumed = cairn("fleet", "resume", "h3", cwd=repo, env=env)  # done by hand: nothing to do
    assert_one_line_error(resumed)
    assert "ticket h3 is completed" in resumed.stderr
    assert cairn("fleet", "stop", cwd=repo, env=env).returncode == 0
    finish(proc, timeout=60)
    branch_holds_work(repo, "h3", 4)
    never_redone(env, "h3")

"""``cairn fleet retry`` on the embedded engine: a ticket left interrupted (its attempts spent)
is queued again, resumes its run without redoing a task, and with ``--fresh-config`` runs with
the base branch's cairn.toml."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from cairn.state import runstate
from cairn.state.layout import discover
from fleet.fleet_setup import (
    agent_env,
    agent_log,
    branch_holds_work,
    finish,
    fleet_repo,
    never_redone,
    record,
    supervisor,
    wait_for,
    wait_line,
)
from helpers import assert_one_line_error, cairn, git, untouched_state


def test_an_interrupted_ticket_is_retried_with_the_base_config_and_resumes(
    tmp_path: Path,
) -> None:
    repo = fleet_repo(tmp_path, {"r": 5}, max_turns=2, max_attempts=1)
    env = agent_env(tmp_path)
    code, lines = finish(supervisor(repo, env, "--once"))
    assert code == 3 and record(repo, "r")["state"] == "interrupted", lines
    done = [e["task"] for e in agent_log(env, "r") if e["event"] == "done"]
    assert done and len(done) <= 2  # the rest needs more turns than 2

    before = untouched_state(repo)
    unknown = cairn("fleet", "retry", "r", "nope", cwd=repo)
    assert_one_line_error(unknown)
    assert untouched_state(repo) == before

    # the fix: more turns, in the base branch's config (the ticket branch keeps its own)
    config = repo / "cairn.toml"
    config.write_text(config.read_text().replace("max_turns = 2", "max_turns = 10"))
    git(repo, "commit", "-qam", "more turns")
    retried = cairn("fleet", "retry", "r", "--fresh-config", "--json", cwd=repo, env=env)
    assert retried.returncode == 0, retried.stderr
    said = json.loads(retried.stdout)
    assert (said["event"], said["was"], said["state"]) == (
        "ticket_retried",
        "interrupted",
        "retrying",
    )
    assert "cairn.toml committed onto cairn/r as" in said["config"]
    assert "max_turns = 10" in git(repo, "show", "cairn/r:cairn.toml")

    code, lines = finish(supervisor(repo, env, "--once"))
    assert code == 0, lines
    assert record(repo, "r")["state"] == "completed"
    never_redone(env, "r")
    branch_holds_work(repo, "r", 5)
    assert [e["command"] for e in lines if e["event"] == "ticket_started"] == ["resume"]

    completed = cairn("fleet", "retry", "r", cwd=repo)
    assert_one_line_error(completed)
    assert "ticket r is completed, so there is nothing to retry" in completed.stderr


def state_of(repo: Path, ticket: str) -> str | None:
    try:
        return str(record(repo, ticket)["state"])
    except FileNotFoundError:
        return None


def test_a_running_supervisor_carries_a_retry_out(tmp_path: Path) -> None:
    repo = fleet_repo(tmp_path, {"s": 3}, max_turns=2, max_attempts=1)
    env = agent_env(tmp_path)
    proc = supervisor(repo, env)
    try:
        wait_for(lambda: state_of(repo, "s") == "interrupted", what="s interrupted")
        config = repo / "cairn.toml"
        config.write_text(config.read_text().replace("max_turns = 2", "max_turns = 10"))
        git(repo, "commit", "-qam", "more turns")
        retried = cairn("fleet", "retry", "s", "--fresh-config", cwd=repo, env=env)
        assert retried.returncode == 0, retried.stderr
        assert "s: retried (interrupted)" in retried.stdout
        assert "the fleet supervisor runs it" in retried.stdout
        wait_for(lambda: state_of(repo, "s") == "completed", what="s completed")
    finally:
        proc.send_signal(signal.SIGTERM)
        finish(proc)
    never_redone(env, "s")
    branch_holds_work(repo, "s", 3)


def test_a_ticket_that_needs_input_is_resumed_once_retried(tmp_path: Path) -> None:
    repo = fleet_repo(tmp_path, {"ni": 3}, max_turns=2, retry_backoff="5s")
    env = agent_env(tmp_path)
    proc = supervisor(repo, env, "--once")
    wait_line(proc, "ticket_retrying")  # its first attempt hit the turn cap
    _, _, layout = discover(repo)
    run_id = layout.latest_run("ni")
    assert run_id is not None
    runstate.interrupt(runstate.RunRef(layout, "ni", run_id), None, "no_progress", None, "stuck")
    code, lines = finish(proc)
    assert code == 1 and record(repo, "ni")["state"] == "needs_input", lines

    retried = cairn("fleet", "retry", "ni", cwd=repo, env=env)
    assert retried.returncode == 0, retried.stderr
    assert "config: cairn.toml of cairn/ni at" in retried.stdout
    code, lines = finish(supervisor(repo, env, "--once"))
    assert code == 0, lines
    assert next(e["command"] for e in lines if e["event"] == "ticket_started") == "resume"
    never_redone(env, "ni")
    branch_holds_work(repo, "ni", 3)

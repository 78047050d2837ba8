"""``cairn fleet retry`` on the embedded engine: a ticket left interrupted (its attempts spent)
is queued again, resumes its run without redoing a task, and with ``--fresh-config`` runs with
the base branch's cairn.toml."""

from __future__ import annotations

import json
from pathlib import Path

from test_fleet_supervisor import (
    agent_env,
    agent_log,
    branch_holds_work,
    finish,
    fleet_repo,
    never_redone,
    record,
    supervisor,
)

from helpers import assert_one_line_error, cairn, git, untouched_state


def test_an_interrupted_ticket_is_retried_with_the_base_config_and_resumes(
    tmp_path: Path,
) -> None:
    repo = fleet_repo(tmp_path, {"r": 6}, max_turns=2, max_attempts=1)
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
    branch_holds_work(repo, "r", 6)
    assert [e["command"] for e in lines if e["event"] == "ticket_started"] == ["resume"]

    completed = cairn("fleet", "retry", "r", cwd=repo)
    assert_one_line_error(completed)
    assert "ticket r is completed, so there is nothing to retry" in completed.stderr

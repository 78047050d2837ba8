"""``cairn answer TICKET "text"``: a run that stopped for input (its agent asked, and made no
progress) is answered and resumed, the answer in the agent's prompt; a fleet ticket the same, in
its worktree. The agent is the fleet's test agent (a real subprocess, ``kind = "command"``), told
to ask until its prompt carries an answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cairn.state import journal
from cairn.state.journal_text import sentence
from cairn.state.layout import discover
from fleet.fleet_setup import agent_env, agent_log, fleet_repo, record
from helpers import assert_one_line_error, cairn, git

ENDPOINT = "https://api.example.test/v2"


def asking_repo(tmp_path: Path) -> Path:
    """The fleet's test repository, with continuations so an idle agent ends needs_input."""
    repo = fleet_repo(tmp_path, {"ASK-1": 2})
    toml = repo / "cairn.toml"
    toml.write_text(toml.read_text().replace("max_continuations = 0", "max_continuations = 3"))
    git(repo, "commit", "-qam", "continuations")
    return repo


def events_of(repo: Path, ticket: str) -> list[dict[str, object]]:
    _, _, layout = discover(repo)
    run = layout.latest_run(ticket)
    assert run is not None
    found, _ = journal.read(layout.run_dir(ticket, run))
    return found


def test_an_answer_resumes_the_run_with_it_in_the_agents_prompt(tmp_path: Path) -> None:
    repo = asking_repo(tmp_path)
    env = agent_env(tmp_path, ask="ASK-1")
    plan = str(repo / "cairn-queue/ASK-1.md")
    asked = cairn("run", plan, "--ticket", "ASK-1", cwd=repo, env=env)
    assert asked.returncode == 1, (asked.stdout, asked.stderr)
    assert "needs input" in asked.stdout
    assert 'cairn answer ASK-1 "what it needs"' in asked.stdout
    assert [e["event"] for e in agent_log(env, "ASK-1")] == ["asked", "asked"]  # then stopped

    # bad input: nothing written
    before = len(events_of(repo, "ASK-1"))
    assert_one_line_error(cairn("answer", "ASK-1", "  ", cwd=repo, env=env))
    assert_one_line_error(cairn("answer", "NONE-1", "x", cwd=repo, env=env))
    assert_one_line_error(cairn("answer", "ASK-1", "y" * 20_000, cwd=repo, env=env))
    assert len(events_of(repo, "ASK-1")) == before

    done = cairn("answer", "ASK-1", ENDPOINT, "--by", "ana", cwd=repo, env=env)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "completed: ticket ASK-1" in done.stdout
    log = agent_log(env, "ASK-1")
    assert {"event": "answered", "answer": ENDPOINT} in [
        {k: v for k, v in e.items() if k in ("event", "answer")} for e in log
    ]
    assert [e["task"] for e in log if e["event"] == "start"] == [1, 2]
    [answered] = [e for e in events_of(repo, "ASK-1") if e["event"] == "answered"]
    assert answered["text"] == ENDPOINT and answered["by"] == "ana"
    assert isinstance(answered["waited_s"], int) and answered["waited_s"] >= 0
    # its run finished: nothing waits for an answer now
    again = cairn("answer", "ASK-1", "more", cwd=repo, env=env)
    assert_one_line_error(again)
    assert "does not wait for an answer" in again.stderr
    # the dashboard's timeline says it
    shown = sentence(answered)
    assert shown == f"answered by ana after {answered['waited_s']}s: {ENDPOINT}"


def test_a_fleet_ticket_waiting_for_input_is_answered_in_its_worktree(tmp_path: Path) -> None:
    repo = asking_repo(tmp_path)
    env = agent_env(tmp_path, ask="ASK-1")
    fleet = subprocess.run(
        [sys.executable, "-m", "cairn", "fleet", "start", "--once", "--json"],
        cwd=repo,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert fleet.returncode == 1, (fleet.stdout, fleet.stderr)
    assert record(repo, "ASK-1")["state"] == "needs_input"
    done = cairn("answer", "ASK-1", ENDPOINT, "--json", cwd=repo, env=env)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert json.loads(done.stdout.splitlines()[-1])["status"] == "completed"
    saved = record(repo, "ASK-1")
    assert saved["state"] == "completed" and saved["attempt"] == 2
    worktree = Path(saved["worktree"])
    assert (worktree / "work/ASK-1-task-2.txt").exists()  # the work is in its worktree


def test_the_fleet_telling_that_it_needs_a_person_does_not_end_the_wait() -> None:
    """``need_raised`` (the supervisor told the ticket needs input) after the stop, and a
    ``need_met`` after it, leave the run waiting; a later event of the run does not."""
    from cairn.run.answers import waiting_since

    stop = {
        "t": "2026-12-03T14:25:11.492+00:00",
        "event": "run_interrupted",
        "reason": "no_progress",
    }
    told = {"t": "2026-12-03T14:25:11.701+00:00", "event": "need_raised", "state": "needs_input"}
    met = {"t": "2026-12-03T14:26:00.000+00:00", "event": "need_met", "state": "needs_input"}
    since = waiting_since([stop, told, met])
    assert since is not None and since.isoformat().startswith("2026-12-03T14:25:11")
    assert waiting_since([stop, told, {"t": stop["t"], "event": "run_resumed"}]) is None


def test_a_run_that_waits_on_another_machine_is_answered_from_a_fresh_clone(
    tmp_path: Path,
) -> None:
    """A --remote run (a CI job) stopped for input; a person answers it from their own clone:
    the run comes here from the remote, takes the answer and goes on, pushed again."""
    repo = asking_repo(tmp_path)
    env = agent_env(tmp_path, ask="ASK-1")
    bare = tmp_path / "shared.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    git(repo, "push", "-q", "origin", "main")
    plan = str(repo / "cairn-queue/ASK-1.md")
    asked = cairn("run", plan, "--ticket", "ASK-1", "--remote", "origin", cwd=repo, env=env)
    assert asked.returncode == 1 and "needs input" in asked.stdout, (asked.stdout, asked.stderr)

    mine = tmp_path / "laptop"
    git(tmp_path, "clone", "-q", str(bare), str(mine))
    git(mine, "config", "user.name", "Ana")
    git(mine, "config", "user.email", "ana@example.com")
    state = git(bare, "rev-parse", "refs/cairn/state/ASK-1").strip()
    refused = cairn("answer", "ASK-1", "  ", "--remote", "origin", cwd=mine, env=env)
    assert_one_line_error(refused)  # judged on the remote's run: nothing taken, nothing written
    assert git(mine, "branch", "--show-current").strip() == "main"
    assert not (mine / ".git/cairn/tickets").exists()
    done = cairn(
        "answer", "ASK-1", ENDPOINT, "--by", "ana", "--remote", "origin", cwd=mine, env=env
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "completed: ticket ASK-1" in done.stdout and "pushed to origin" in done.stdout
    [answered] = [e for e in events_of(mine, "ASK-1") if e["event"] == "answered"]
    assert answered["text"] == ENDPOINT and answered["by"] == "ana"
    assert git(bare, "rev-parse", "refs/cairn/state/ASK-1").strip() != state
    remote_log = git(bare, "show", f"refs/cairn/state/ASK-1:{answered_run(mine)}/run-log.jsonl")
    assert '"event": "answered"' in remote_log or '"event":"answered"' in remote_log


def answered_run(repo: Path) -> str:
    _, _, layout = discover(repo)
    run = layout.latest_run("ASK-1")
    assert run is not None
    return run

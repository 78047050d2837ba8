"""A machine restart under a fleet at work: every process of the fleet (the supervisor, its runs,
their agents) SIGKILLed at one instant, the temp dir they used emptied, then ``cairn fleet start
--once`` again. Every interrupted ticket is re-adopted from what is left on disk (its worktree,
its snapshot, its journal) and resumed to completion: no task redone, nothing the agent wrote
lost, the worktree the same one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from cairn.util.procs import pid_alive
from fleet.fleet_setup import (
    agent_env,
    agent_log,
    branch_holds_work,
    descendants,
    finish,
    fleet_repo,
    kill_everything,
    never_redone,
    read_until,
    record,
    started,
    supervisor,
    wait_for,
)
from helpers import git

pytestmark = pytest.mark.slow

PLANS = {"r1": 3, "r2": 3}


def journal_events(repo: Path, ticket: str) -> list[dict[str, Any]]:
    runs = sorted((repo / ".git/cairn/tickets" / ticket).glob("*/run-log.jsonl"))
    return [json.loads(line) for run in runs for line in run.read_text().splitlines()]


def started_task(env: dict[str, str], ticket: str, task: int) -> bool:
    return any(e["event"] == "start" and e["task"] == task for e in agent_log(env, ticket))


def test_after_a_reboot_fleet_start_resumes_every_interrupted_ticket(tmp_path: Path) -> None:
    repo = fleet_repo(tmp_path, PLANS, max_turns=10, stall_timeout="2m")
    tmp = tmp_path / "tmp"  # the fleet's system temp dir, emptied by the reboot
    tmp.mkdir()
    # each turn sleeps 4 s before its task's file: the machine dies in task 2's turn
    env = {**agent_env(tmp_path, slow="r1,r2", pause="4"), "TMPDIR": str(tmp)}
    first = supervisor(repo, env, "--once")
    pids = started(read_until(first, lambda seen: len(started(seen)) == 2))
    wait_for(lambda: all(started_task(env, t, 2) for t in PLANS), 90, "task 2 started in both runs")
    worktrees = {t: Path(record(repo, t)["worktree"]) for t in PLANS}
    drafts = {}
    for ticket, path in worktrees.items():  # what the agent has written and not committed
        draft = path / "notes" / f"{ticket}-draft.txt"
        draft.parent.mkdir(exist_ok=True)
        draft.write_text(f"{ticket}: half a thought, never committed\n" * 50)
        drafts[ticket] = draft.read_bytes()
    (tmp / "cairn-leftover").write_text("what the dead processes left in /tmp\n")

    fleet = [first.pid, *descendants(first.pid)]
    kill_everything(first)  # the power cut: all frozen, then all killed at one instant
    wait_for(lambda: not any(pid_alive(p) for p in fleet), 30, "every process of the fleet gone")
    assert not any(pid_alive(p) for p in pids.values())
    for entry in tmp.iterdir():  # the new boot's /tmp
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    for ticket in PLANS:
        left = record(repo, ticket)
        assert left["state"] == "running" and left["attempt"] == 1, left
        assert any(e["event"] == "done" and e["task"] == 1 for e in agent_log(env, ticket))

    again = {k: v for k, v in env.items() if k != "FLEET_AGENT_SLOW"}
    code, lines = finish(supervisor(repo, again, "--once"), timeout=240)

    assert code == 0, lines
    assert {e["ticket"] for e in lines if e["event"] == "ticket_recovered"} == set(PLANS)
    assert not [e for e in lines if e["event"] == "ticket_adopted"]  # nothing was alive
    resumed = [(e["ticket"], e["command"]) for e in lines if e["event"] == "ticket_started"]
    assert sorted(resumed) == [("r1", "resume"), ("r2", "resume")]
    for ticket, tasks in PLANS.items():
        saved = record(repo, ticket)
        assert (saved["state"], saved["last_exit"]) == ("completed", 0), saved
        assert Path(saved["worktree"]) == worktrees[ticket]  # the same worktree, re-adopted
        never_redone(env, ticket)
        done = [e["task"] for e in agent_log(env, ticket) if e["event"] == "done"]
        assert sorted(done) == list(range(1, tasks + 1)), done  # each task done once
        branch_holds_work(repo, ticket, tasks)
        assert (worktrees[ticket] / "notes" / f"{ticket}-draft.txt").read_bytes() == drafts[ticket]
        events = [e["event"] for e in journal_events(repo, ticket)]
        # one run, taken over from its dead pid and resumed from its journal and snapshot
        assert len(list((repo / ".git/cairn/tickets" / ticket).glob("*/run-log.jsonl"))) == 1
        assert "takeover" in events and events[-1] == "run_finished", events
        assert (
            git(worktrees[ticket], "rev-parse", "--abbrev-ref", "HEAD").strip() == f"cairn/{ticket}"
        )

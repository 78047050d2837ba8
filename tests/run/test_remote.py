"""``cairn run|resume --remote``: a run cut off on one machine continues in any clone of the
shared remote (docs/ci.md), fenced, with every bad input refused before anything is written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers import (
    CliResult,
    assert_one_line_error,
    cairn,
    git,
    on_remote,
    pushed_tasks,
    snapshot_files,
)
from run.run_setup import TICKET, Project, code, done, exit_code, outcome, wait_for

BRANCH = f"refs/heads/cairn/{TICKET}"
WIP = f"refs/cairn/wip/{TICKET}"
STATE = f"refs/cairn/state/{TICKET}"


def write(path: str, content: str) -> dict[str, Any]:
    return {"write": {"path": path, "content": content}}


def shared(p: Project, tmp_path: Path) -> Path:
    """A bare repository as the project's ``origin``, holding its main branch."""
    bare = tmp_path / "shared.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(p.repo, "remote", "add", "origin", str(bare))
    git(p.repo, "push", "-q", "origin", "main")
    return bare


def state_file(bare: Path, name: str) -> str:
    """A file of the remote's run state (``<run>/<name>`` of the latest run)."""
    listing = git(bare, "ls-tree", "--name-only", STATE).split()
    run = sorted(n for n in listing if n[:1].isdigit())[-1]
    return git(bare, "show", f"{STATE}:{run}/{name}")


def events(result: CliResult) -> list[dict[str, Any]]:
    """The JSON lines ``--json`` printed before its outcome."""
    return [json.loads(line) for line in result.stdout.strip().splitlines()[:-1]]


def fresh_clone(bare: Path, where: Path) -> Path:
    git(where.parent, "clone", "-q", str(bare), str(where))
    git(where, "config", "user.name", "Scripted Agent")
    git(where, "config", "user.email", "agent@example.com")
    return where


def test_a_run_cut_off_continues_in_a_fresh_clone_without_redoing_a_task(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    p = project(
        {
            "coder": [
                [write("one.txt", "one\n"), done(1, "one.txt")],
                [write("two.txt", "half\n"), {"sleep": 60}],
                [write("two.txt", "two\n"), done(2, "two.txt")],
            ]
        },
        max_turns=5,
        max_continuations=1,
    )
    bare = shared(p, tmp_path)
    proc = p.popen("--ticket", TICKET, "--remote", "origin", "--json")
    wait_for(lambda: (p.repo / "two.txt").exists() and p.agent_pids(), 60, "the second turn")
    # task 1's completion is pushed at once, not at the next checkpoint (push_every: 5m)
    wait_for(
        lambda: on_remote(bare, STATE) and pushed_tasks(bare, STATE).get(1) == "completed",
        15,
        "task 1 done on the remote",
    )
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert exit_code(proc.returncode, err) == 3, err.decode()
    said = json.loads(out.decode().strip().splitlines()[-1])
    assert said["reason"] == "signal"
    assert said["next_command"] == f"cairn resume {TICKET} --remote origin"
    assert said["remote"]["pushed"] is True
    assert said["remote"]["state"] == on_remote(bare, STATE)
    assert git(p.repo, "branch", "--show-current").strip() == f"cairn/{TICKET}"
    # the agent's uncommitted file is in the pushed snapshot, its branch beside it
    assert snapshot_files(bare, on_remote(bare, WIP))["two.txt"] == b"half\n"
    assert on_remote(bare, BRANCH) == git(p.repo, "rev-parse", "HEAD").strip()

    clone = fresh_clone(bare, tmp_path / "elsewhere")
    seen = cairn("catchup", TICKET, "--remote", "origin", "--json", cwd=clone)
    assert code(seen) == 0, seen.stderr
    report = json.loads(seen.stdout)
    assert report["state"] == "interrupted" and report["done"] == ["1"]
    assert report["next_command"] == f"cairn resume {TICKET} --remote origin"
    assert git(clone, "branch", "--show-current").strip() == "main"  # the work tree untouched
    assert not (clone / "one.txt").exists() and not (clone / ".git/cairn/tickets").exists()
    result = cairn("resume", TICKET, "--remote", "origin", "--json", cwd=clone)
    assert code(result) == 0, result.stderr
    assert outcome(result)["status"] == "completed"
    assert git(clone, "branch", "--show-current").strip() == f"cairn/{TICKET}"
    assert (clone / "two.txt").read_text() == "two\n"
    assert (clone / "one.txt").read_text() == "one\n"  # restored from the snapshot
    assert pushed_tasks(bare, STATE) == {1: "completed", 2: "completed"}
    prompts = [
        json.loads(line) for line in state_file(bare, "scripted-agent/prompts.jsonl").splitlines()
    ]
    assert [r["played_turn"] for r in prompts if r["role"] == "coder"] == [1, 2, 3]  # none again
    assert "rebuilt from origin" in result.stderr or "rebuilt from origin" in result.stdout


def test_a_machine_whose_ticket_moved_on_is_fenced_and_stops(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    p = project(
        {"coder": [[write("a.txt", "a\n"), done(1)], [done(2)]]},
        max_turns=1,
        budget_pressure_turns=0,
        max_continuations=0,
    )
    bare = shared(p, tmp_path)
    first = p.run("--ticket", TICKET, "--remote", "origin", "--json")
    assert code(first) == 3, first.stderr  # the turn cap: task 2 left
    clone = fresh_clone(bare, tmp_path / "elsewhere")
    moved = cairn("resume", TICKET, "--remote", "origin", "--json", cwd=clone)
    assert code(moved) == 0, moved.stderr
    pushed = on_remote(bare, STATE)
    # the first machine, stale, runs a new run of the ticket: refused before anything is written
    again = p.run("--ticket", TICKET, "--remote", "origin")
    assert_one_line_error(again)
    assert "origin already holds a run of ticket T-1" in again.stderr
    assert "cairn resume T-1 --remote origin" in again.stderr
    assert on_remote(bare, STATE) == pushed


def test_bad_remotes_are_refused_before_the_agent_starts(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    p = project({"coder": [[done(1)], [done(2)]]})
    none = p.run("--ticket", TICKET, "--remote", "origin")
    assert_one_line_error(none)
    assert "--remote 'origin' names no remote" in none.stderr
    git(p.repo, "remote", "add", "gone", str(tmp_path / "nowhere.git"))
    gone = p.run("--ticket", TICKET, "--remote", "gone")
    assert_one_line_error(gone)
    assert "gone (" in gone.stderr and "cannot be reached" in gone.stderr
    assert not p.ticket_dir.exists()  # nothing written
    assert git(p.repo, "branch", "--show-current").strip() == "main"
    resumed = cairn("resume", TICKET, "--remote", "gone", cwd=p.repo)
    assert_one_line_error(resumed)
    bare = shared(p, tmp_path)
    nothing = cairn("resume", TICKET, "--remote", "origin", cwd=p.repo)
    assert_one_line_error(nothing)
    assert "origin holds no run of ticket T-1" in nothing.stderr
    seen = cairn("catchup", TICKET, "--remote", "origin", "--json", cwd=p.repo)
    assert code(seen) == 0 and json.loads(seen.stdout)["state"] == "none"
    assert not on_remote(bare, STATE) and not p.ticket_dir.exists()


def test_a_push_that_fails_later_is_a_warning_and_the_run_goes_on(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    p = project(
        {"coder": [[done(1)], [done(2)]]}, max_turns=1, budget_pressure_turns=0, max_continuations=1
    )
    bare = shared(p, tmp_path)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'the remote is down' >&2\nexit 1\n")
    hook.chmod(0o755)
    result = p.run("--ticket", TICKET, "--remote", "origin", "--json")
    assert code(result) == 0, result.stderr
    said = outcome(result)
    assert said["status"] == "completed"
    assert said["remote"]["pushed"] is False and "the remote is down" in said["remote"]["error"]
    warned = [e["message"] for e in events(result) if e.get("event") == "warning"]
    failed = [w for w in warned if "could not push ticket T-1 to origin" in w]
    assert len(failed) == 1 and "the run goes on" in failed[0]  # said once, not at each retry
    hook.unlink()
    # the run is complete here; nothing of it reached the remote, and it says so
    assert not on_remote(bare, STATE)


def claim_elsewhere(bare: Path) -> str:
    """What another machine's resume does to the remote: a state commit one generation above,
    on the remote's, pushed there (its claim). Returns its sha."""
    state = on_remote(bare, STATE)
    body = git(bare, "log", "-1", "--format=%B", state)
    generation = int(body.split("Cairn-Generation: ")[1].split()[0])
    message = f"cairn state {TICKET}\n\nCairn-Generation: {generation + 1}\nCairn-Attempt: 0\n"
    tree = git(bare, "rev-parse", f"{state}^{{tree}}").strip()
    claimed = git(bare, "commit-tree", tree, "-p", state, "-m", message).strip()
    git(bare, "update-ref", STATE, claimed, state)
    return claimed


def test_a_run_whose_ticket_another_machine_took_is_fenced_and_stops(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    p = project({"coder": [[write("a.txt", "mine\n"), {"sleep": 60}]]}, tasks=("One",))
    with (p.repo / "cairn.toml").open("a") as config:
        config.write('\n[run]\npush_every = "1s"\n')
    git(p.repo, "commit", "-qam", "push every second")
    bare = shared(p, tmp_path)
    proc = p.popen("--ticket", TICKET, "--remote", "origin", "--json")
    wait_for(lambda: (p.repo / "a.txt").exists() and p.agent_pids(), 60, "the agent's turn")
    wait_for(lambda: on_remote(bare, WIP), 15, "a checkpoint with the agent's file")
    claimed = claim_elsewhere(bare)
    out, err = proc.communicate(timeout=30)  # the next checkpoint is refused: the run stops
    assert exit_code(proc.returncode, err) == 3, err.decode()
    said = json.loads(out.decode().strip().splitlines()[-1])
    assert said["reason"] == "fenced"
    assert "another machine continued it" in said["error"]
    assert said["remote"]["pushed"] is False and said["remote"]["fenced"]
    assert said["next_command"] == f"cairn catchup {TICKET} --remote origin"
    assert on_remote(bare, STATE) == claimed  # nothing of the stale run landed
    assert snapshot_files(p.repo, p.wip())["a.txt"] == b"mine\n"  # its work stays here
    p.wait_agents_gone(5)


def test_a_resume_here_of_a_run_the_remote_does_not_hold_is_refused(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    p = project(
        {"coder": [[done(1)], [done(2)]]}, max_turns=1, budget_pressure_turns=0, max_continuations=0
    )
    bare = shared(p, tmp_path)
    elsewhere = fresh_clone(bare, tmp_path / "elsewhere")
    plan = tmp_path / "plan-copy.md"
    plan.write_text(p.plan.read_text())
    pushed = cairn("run", str(plan), "--ticket", TICKET, "--remote", "origin", cwd=elsewhere)
    assert code(pushed) == 3, pushed.stderr
    here = p.run("--ticket", TICKET)  # a run of the same ticket here, never pushed
    assert code(here) == 3, here.stderr
    before = on_remote(bare, STATE)
    refused = cairn("resume", TICKET, "--remote", "origin", cwd=p.repo)
    assert_one_line_error(refused)
    assert "has a run here that is not on origin" in refused.stderr
    assert "generation 1" in refused.stderr and "nothing was overwritten" in refused.stderr
    assert on_remote(bare, STATE) == before
    assert git(p.repo, "branch", "--show-current").strip() == "main"


def test_a_run_started_here_without_a_remote_is_pushed_by_its_resume(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    p = project(
        {"coder": [[write("a.txt", "a\n"), done(1)], [done(2)]]},
        max_turns=1,
        budget_pressure_turns=0,
        max_continuations=0,
    )
    bare = shared(p, tmp_path)
    first = p.run("--ticket", TICKET, "--no-remote")
    assert code(first) == 3, first.stderr
    assert not on_remote(bare, STATE)
    resumed = p.resume("--remote", "origin", "--json")
    assert code(resumed) == 0, resumed.stderr
    assert git(p.repo, "branch", "--show-current").strip() == f"cairn/{TICKET}"
    notes = [e["message"] for e in events(resumed) if e.get("event") == "note"]
    assert any(f"working on branch cairn/{TICKET} (from main)" in n for n in notes), notes
    assert pushed_tasks(bare, STATE) == {1: "completed", 2: "completed"}
    body = git(bare, "log", "-1", "--format=%B", STATE)
    assert "Cairn-Generation: 1" in body  # the first claim of the ticket on the remote


def test_a_sigterm_during_the_last_push_does_not_stop_it(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    """A hastier runner than GitHub's: SIGINT, then SIGTERM 0.8 s later, while the cut's last
    push is still on its way (the remote takes 2 s to accept a push). The push is not cut short
    and cairn exits 3 once it is there."""
    p = project({"coder": [[write("b.txt", "partial\n"), {"sleep": 60}]]}, tasks=("One",))
    bare = shared(p, tmp_path)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\ncat >/dev/null\nsleep 2\n")
    hook.chmod(0o755)
    command = [sys.executable, "-m", "cairn", "run", str(p.plan), "--ticket", TICKET]
    proc = subprocess.Popen(
        [*command, "--remote", "origin", "--json"],
        cwd=p.repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    p.started.append(proc)
    wait_for(lambda: (p.repo / "b.txt").exists() and p.agent_pids(), 60, "the agent's turn")
    wait_for(lambda: on_remote(bare, STATE), 30, "the run's claim on the remote")
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.8)
    os.killpg(proc.pid, signal.SIGTERM)  # while the last push waits for the remote
    out, err = proc.communicate(timeout=30)
    assert exit_code(proc.returncode, err) == 3, err.decode()
    said = json.loads(out.decode().strip().splitlines()[-1])
    assert said["reason"] == "signal" and said["remote"]["pushed"] is True
    assert snapshot_files(bare, on_remote(bare, WIP))["b.txt"] == b"partial\n"
    assert said["remote"]["state"] == on_remote(bare, STATE)
    assert "run_interrupted" in state_file(bare, "run-log.jsonl")
    p.wait_agents_gone(5)


def test_a_resume_of_a_run_still_going_elsewhere_is_refused_before_anything_is_written(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    p = project({"coder": [[write("a.txt", "a\n"), {"sleep": 60}]]}, tasks=("One",))
    bare = shared(p, tmp_path)
    proc = p.popen("--ticket", TICKET, "--remote", "origin")
    wait_for(lambda: on_remote(bare, STATE) and p.agent_pids(), 60, "the run's claim")
    clone = fresh_clone(bare, tmp_path / "elsewhere")
    refused = cairn("resume", TICKET, "--remote", "origin", cwd=clone)
    assert_one_line_error(refused)
    assert "is being run right now" in refused.stderr
    # judged on the remote's state before taking it: this clone is as it was
    assert git(clone, "branch", "--show-current").strip() == "main"
    assert not (clone / ".git/cairn/tickets").exists()
    assert git(clone, "status", "--porcelain").strip() == ""
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    p.wait_agents_gone(5)


def test_a_sigint_during_the_claim_push_stops_the_run_before_its_agent(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    """Found by bench/chaos/remote_kill.py: a cancel while the run's claim was on its way to
    the remote was dropped, and the agent started anyway."""
    p = project({"coder": [[write("a.txt", "a\n"), {"sleep": 60}]]}, tasks=("One",))
    bare = shared(p, tmp_path)
    pushing = tmp_path / "pushing"
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\ncat >/dev/null\ntouch {pushing}\nsleep 2\n")
    hook.chmod(0o755)
    proc = p.popen("--ticket", TICKET, "--remote", "origin", "--json")
    wait_for(pushing.exists, 60, "the run's claim on its way to the remote")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert exit_code(proc.returncode, err) == 3, err.decode()
    said = json.loads(out.decode().strip().splitlines()[-1])
    assert said["reason"] == "signal" and said["dispatches"] == 0
    assert not (p.repo / "a.txt").exists() and not p.agent_pids()  # the agent never started
    assert said["remote"]["pushed"] is True and said["remote"]["state"] == on_remote(bare, STATE)


def test_a_task_done_returns_once_its_completion_is_on_the_remote(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    """As on a worker of the fleet on Temporal (cairn.util.barrier): the agent's report waits
    for the push, so a machine lost right after it cannot take a completion the agent was told
    of. The remote takes a second over each push here: without the wait, the look right after
    the report would find the claim's state."""
    seen = tmp_path / "after-done.txt"
    p = project(
        {
            "coder": [
                [
                    done(1),
                    {"run": f"git ls-remote origin refs/cairn/state/{TICKET} > {seen}"},
                    done(2),
                ]
            ]
        },
    )
    bare = shared(p, tmp_path)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\ncat >/dev/null\nsleep 1\n")
    hook.chmod(0o755)
    result = p.run("--ticket", TICKET, "--remote", "origin", "--json")
    assert code(result) == 0, result.stderr
    state = seen.read_text().split()[0]  # the remote's state right after the report
    assert pushed_tasks(bare, state)[1] == "completed"


def test_a_push_that_failed_is_retried_and_the_remote_catches_up(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    """The remote refuses pushes until the agent, between its two tasks, lets it take them
    again: the failure is said once, the next push gets there and says so, and the remote ends
    with the whole run."""
    down = tmp_path / "remote-down"
    down.write_text("")
    p = project({"coder": [[done(1), {"run": f"rm {down}"}, done(2)]]})
    bare = shared(p, tmp_path)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(
        f"#!/bin/sh\ncat >/dev/null\nif [ -e {down} ]; then echo down >&2; exit 1; fi\n"
    )
    hook.chmod(0o755)
    result = p.run("--ticket", TICKET, "--remote", "origin", "--json")
    assert code(result) == 0, result.stderr
    warned = [e["message"] for e in events(result) if e.get("event") == "warning"]
    assert len([w for w in warned if "could not push ticket T-1 to origin" in w]) == 1, warned
    assert len([w for w in warned if "pushed ticket T-1 to origin again" in w]) == 1, warned
    said = outcome(result)
    assert said["remote"]["pushed"] is True and said["remote"]["error"] is None
    assert pushed_tasks(bare, STATE) == {1: "completed", 2: "completed"}

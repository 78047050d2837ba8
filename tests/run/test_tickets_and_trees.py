"""Which ticket a command means, and one live run per work tree: a run whose ticket is not the
branch's is found by catchup, resume and the SessionStart hook on that branch; a second ticket
in a work tree where one already runs is refused unless ``--allow-shared``; ``max_turns = 2``
alone is a valid config. The real CLI in subprocesses, the scripted agent, real git."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from cairn.state import marker
from helpers import assert_one_line_error, cairn, git
from run.run_setup import Project, code, done, exit_code, outcome, wait_for


def popen(cwd: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "cairn", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def live(state_root: Path, ticket: str) -> bool:
    path = state_root / "tickets" / ticket / ".in-progress.yaml"
    current = marker.read(path) if path.exists() else None
    return current is not None and current.owner is not None and current.dispatch is not None


def stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    return exit_code(proc.returncode, err)


# --- 1. the ticket from the plan, on a branch that names another -------------------------------


def test_a_run_from_the_plan_is_found_from_its_branch(project: Callable[..., Project]) -> None:
    p = project({"coder": [[done(1)], [done(2)]]}, max_turns=1, budget_pressure_turns=0)
    git(p.repo, "checkout", "-q", "-b", "ECO-2")
    plan = p.plan.parent / "plan.md"
    plan.write_text(p.plan.read_text())
    first = cairn("run", str(plan), cwd=p.repo)
    assert code(first) == 3, first.stderr
    assert first.stdout.splitlines()[1] == (
        "ticket plan (branch ECO-2 would be ticket ECO-2); cairn catchup and cairn resume on "
        "this branch find it"
    )
    mapping = json.loads((p.state_root / "branches.json").read_text())
    assert mapping == {"ECO-2": ["plan"]}

    report = cairn("catchup", "--json", cwd=p.repo)
    assert code(report) == 0, report.stderr
    got = json.loads(report.stdout)
    assert got["ticket"] == "plan" and got["state"] == "interrupted"
    assert got["next_command"] == "cairn resume plan"
    assert got["warnings"][0] == (
        "branch ECO-2 has no run of ticket ECO-2; using ticket plan, run from it"
    )
    text = cairn("catchup", cwd=p.repo)
    assert "ticket plan: interrupted" in text.stdout and "using ticket plan" in text.stdout

    hook = subprocess.run(
        [sys.executable, "-m", "cairn", "hook", "claude", "session-start"],
        input=json.dumps({"hook_event_name": "SessionStart", "cwd": str(p.repo)}).encode(),
        capture_output=True,
        check=False,
    )
    assert hook.returncode == 0
    context = json.loads(hook.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "on ticket plan" in context and "cairn resume plan" in context

    resumed = cairn("resume", "--json", cwd=p.repo)
    assert code(resumed) == 0, resumed.stderr
    assert outcome(resumed)["ticket"] == "plan" and outcome(resumed)["status"] == "completed"
    assert not (p.state_root / "tickets" / "ECO-2").exists()


def test_the_branchs_own_ticket_wins_and_nothing_is_remembered_when_they_agree(
    project: Callable[..., Project],
) -> None:
    p = project({"coder": [[done(1)], [done(2)]]}, max_turns=1, budget_pressure_turns=0)
    git(p.repo, "checkout", "-q", "-b", "T-1")
    first = p.run()
    assert code(first) == 3, first.stderr
    assert "would be ticket" not in first.stdout
    assert not (p.state_root / "branches.json").exists()
    # the branch's own ticket has a run: it wins over anything remembered for the branch
    (p.state_root / "branches.json").write_text('{"T-1": ["other"]}\n')
    got = json.loads(cairn("catchup", "--json", cwd=p.repo).stdout)
    assert got["ticket"] == "T-1" and got["warnings"] == []


# --- 2. one live run per work tree --------------------------------------------------------------


def test_a_second_ticket_in_a_busy_work_tree_is_refused(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    p = project({"coder": [[{"sleep": 60}]]}, tasks=("One",))
    other_plan = tmp_path / "T-2.md"
    other_plan.write_text(p.plan.read_text())
    first = p.popen()
    started: list[subprocess.Popen[bytes]] = []
    try:
        wait_for(lambda: live(p.state_root, "T-1"), 30, "the first run's marker")
        refused = cairn("run", str(other_plan), cwd=p.repo)
        assert_one_line_error(refused)
        assert "ticket T-1 is being run in this work tree" in refused.stderr
        assert f"pid {first.pid}" in refused.stderr
        assert "git worktree add ../T-2" in refused.stderr and "--allow-shared" in refused.stderr
        assert not (p.state_root / "tickets" / "T-2").exists()  # nothing written

        # another work tree of the same clone is free to run its own ticket
        elsewhere = tmp_path / "wt2"
        git(p.repo, "worktree", "add", "-q", "-b", "wt2", str(elsewhere))
        started.append(popen(elsewhere, "run", str(other_plan)))
        wait_for(lambda: live(p.state_root, "T-2"), 30, "the run in the other work tree")
        assert stop(started[-1]) == 3

        # --allow-shared goes ahead in the busy work tree, and resume is checked the same way
        started.append(popen(p.repo, "run", str(other_plan), "--allow-shared"))
        wait_for(lambda: live(p.state_root, "T-2"), 30, "the shared run")
        assert stop(started[-1]) == 3
        again = cairn("resume", "T-2", cwd=p.repo)
        assert_one_line_error(again)
        assert f"pid {first.pid}" in again.stderr
        started.append(popen(p.repo, "resume", "T-2", "--allow-shared"))
        wait_for(lambda: live(p.state_root, "T-2"), 30, "the shared resume")
        assert stop(started[-1]) == 3
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert stop(first) == 3


# --- 3. max_turns alone ------------------------------------------------------------------------


def test_max_turns_two_alone_runs(project: Callable[..., Project]) -> None:
    p = project({"coder": [[done(1)], [done(2)]]}, max_turns=2)
    config = p.repo / "cairn.toml"
    config.write_text(
        "".join(
            line
            for line in config.read_text().splitlines(keepends=True)
            if not line.startswith("budget_pressure_turns")
        )
    )
    git(p.repo, "commit", "-qam", "max_turns alone")
    result = p.run("--json")
    assert code(result) == 0, result.stderr
    assert outcome(result)["status"] == "completed"
    pressured = [e["pressure"] for e in p.named("turn")]
    assert pressured == [False, True]  # pressure 1: the wrap-up directive on the last turn
    assert code(cairn("run", str(p.plan), "--ticket", "T-3", "--max-turns", "1", cwd=p.repo)) == 3

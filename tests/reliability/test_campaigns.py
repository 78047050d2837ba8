"""The chaos campaigns of ``bench/chaos/`` at their CI size, as real subprocesses.

Each campaign runs once per test session at its ``--quick`` size with a fresh seed (printed on
failure; rerun with ``--seed``), shared by the tests that read its results, and once with
``--self-test``, which injects every fault its checker looks for and must exit 1 naming each.

Defects a quick run meets only now and then have a deterministic regression test here too.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agents.real_agents import find_cli
from helpers import assert_one_line_error, cairn, git, make_repo, state_root, write

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHAOS = ROOT / "bench" / "chaos"
TIMEOUT = 1200
NICE = 5


CAMPAIGNS = ("fleet_kill", "kill_resume", "kill_writes", "lease_race", "snapshot_fuzz")


def shared_dir(factory: pytest.TempPathFactory) -> Path:
    """A directory every xdist worker of this session sees, and no other session does."""
    base = factory.getbasetemp()
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    shared = base.parent / f"chaos-{run}" if run else base / "chaos"
    shared.mkdir(exist_ok=True)
    return shared


def run_campaign(name: str, *args: str, out: Path) -> tuple[int, dict[str, Any], str]:
    """Run ``bench/chaos/<name>.py`` with ``args``; its exit code, JSON results and output."""
    results = out / f"{name}-{'-'.join(a.strip('-') for a in args)}.json"
    done = subprocess.run(
        [sys.executable, str(CHAOS / f"{name}.py"), *args, "--json", str(results)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        preexec_fn=lambda: os.nice(NICE),  # the rest of the suite keeps its timing
    )
    output = done.stdout + done.stderr[-4000:]
    data = json.loads(results.read_text()) if results.exists() else {}
    return done.returncode, data, output


def quick(name: str, factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], str]:
    """The campaign's quick run, once per session whichever worker asks first."""
    shared = shared_dir(factory)
    with (shared / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cached = shared / f"{name}.result.json"
        if cached.exists():
            found = json.loads(cached.read_text())
            return found["code"], found["data"], found["output"]
        seed = str(random.randrange(2**32))
        code, data, output = run_campaign(name, "--quick", "--seed", seed, out=shared)
        cached.write_text(json.dumps({"code": code, "data": data, "output": output}))
        return code, data, output


def explain(data: dict[str, Any], output: str) -> str:
    return f"seed {data.get('seed')}; violations {data.get('violations')}\n{output[-3000:]}"


# --- the quick campaigns ---------------------------------------------------------------------


@pytest.mark.parametrize("name", CAMPAIGNS)
def test_quick_campaign_finds_nothing(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    code, data, output = quick(name, tmp_path_factory)
    assert data, output
    assert data["figures"][data["unit"]] == data["cases"], output  # every case ran
    assert code == 0, explain(data, output)


def test_quick_fleet_kill_drives_the_fake_github(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Its first fleet is a github one: issues in, pushes, pull requests, comments, labels and
    notifications out, each checked to have happened exactly once."""
    _, data, output = quick("fleet_kill", tmp_path_factory)
    assert data, output
    figures = data["figures"]
    assert figures["fleets against the fake GitHub"] >= 1, output
    assert figures["pull requests opened"] >= 1 and figures["comments posted"] >= 1, output
    assert figures["notifications delivered"] >= 1, output


def test_quick_failover_campaign_loses_nothing(tmp_path: Path) -> None:
    """``failover.py`` drives the real Claude Code and Codex CLIs: one run (not ``--quick``'s
    two, to stay under 20 s), its direction and its cut drawn from a fresh seed."""
    for name in ("claude", "codex"):
        find_cli(name)
    seed = random.randrange(2**32)
    first = random.choice(["claude-code", "codex"])
    args = ("--runs", "1", "--seed", str(seed), "--first", first)
    code, data, output = run_campaign("failover", *args, out=tmp_path)
    assert data, output
    assert data["figures"]["runs"] == 1, output
    assert code == 0, f"--first {first}; {explain(data, output)}"
    assert data["figures"]["switches"] == data["figures"]["completed runs"] == 1, output


# --- the defects the campaigns found, at the instant that shows each ---------------------------

UNREPORTABLE_NAME_SEED = "2390419887"  # a snapshot_fuzz tree with an over-cap non-UTF-8 name


def test_snapshot_of_an_over_cap_file_with_a_non_utf8_name(tmp_path: Path) -> None:
    code, data, output = run_campaign(
        "snapshot_fuzz", "--replay", UNREPORTABLE_NAME_SEED, out=tmp_path
    )
    assert code == 0, explain(data, output)


def test_a_stale_ref_lock_does_not_stop_snapshots(repo: Path) -> None:
    """What a SIGKILL of a save's whole process tree inside ``git update-ref`` leaves: the
    ticket's ref lock, from a process long gone. The next snapshot must still be taken."""
    write(repo, "work.txt", "first\n")
    assert cairn("wip", "save", "--ticket", "T-1", cwd=repo).returncode == 0
    lock = repo / ".git" / "refs" / "cairn" / "wip" / "T-1.lock"
    lock.write_text("")
    an_hour_ago = time.time() - 3600
    os.utime(lock, (an_hour_ago, an_hour_ago))
    write(repo, "work.txt", "second\n")
    result = cairn("wip", "save", "--ticket", "T-1", "--timeout-ms", "5000", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert git(repo, "show", "refs/cairn/wip/T-1:work.txt") == "second\n"
    assert "warning: removed refs/cairn/wip/T-1.lock" in result.stdout
    assert not lock.exists()
    lock.write_text("")  # and by a snapshot that records nothing new
    result = cairn("wip", "save", "--ticket", "T-1", cwd=repo)
    assert result.returncode == 0 and "nothing" in result.stdout, result.stdout
    assert "warning: removed refs/cairn/wip/T-1.lock" in result.stdout
    assert not lock.exists()


def test_a_lease_holder_that_never_records_itself_is_named_as_such(tmp_path: Path) -> None:
    """A process holds the ticket's lease lock and writes no owner record (a cairn stopped
    between its flock and its record): the loser waits for the record, then says so in one
    line."""
    script = tmp_path / "script.yaml"
    script.write_text("coder:\n  - - say: hi\n")
    toml = f'[agent]\nkind = "scripted"\nscript = "{script}"\n[loop]\nphases = ["implement"]\n'
    repo = make_repo(tmp_path / "repo", {"README.md": "x\n", "cairn.toml": toml})
    plan = tmp_path / "plan.md"
    plan.write_text("# Plan: p\n\n### Task 0: one\n")
    lease = state_root(repo) / "tickets" / "T-1" / "lease"
    lease.parent.mkdir(parents=True)
    hold = (
        "import fcntl, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "time.sleep(120)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, str(lease)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        result = cairn("run", str(plan), "--ticket", "T-1", cwd=repo)
    finally:
        holder.kill()
        holder.wait()
    assert_one_line_error(result)
    assert "already being run by another cairn process" in result.stderr, result.stderr


# --- the checkers catch what they look for -----------------------------------------------------

# the faults each --self-test injects, and the violation kind each must be reported as
SELF_TESTS = {
    "kill_writes": {
        "unreadable_state",
        "journal_bad_line",
        "out_of_step",
        "user_state_changed",
        "leftover_temp",
        "git_lock_left",
        "cli_read_failed",
    },
    "fleet_kill": {
        "not_completed",
        "ticket_failed",
        "task_redone",
        "bytes_lost",
        "base_damaged",
        "worktree_incomplete",
        "run_died_with_supervisor",
        "run_not_adopted",
        "supervisor_failed",
        "unreadable_state",
        "duplicate_pr",
        "duplicate_comment",
        "unkeyed_comment",
        "duplicate_notification",
        "lost_transition",
        "duplicate_review",
    },
    "kill_resume": {"task_redone", "bytes_lost"},
    "lease_race": {"two_winners", "loser_message", "no_winner"},
    "snapshot_fuzz": {"restore_differs", "user_state_changed", "oversize_not_reported"},
    # two trials, nine faults (about 40 s): its quick run is not part of the suite
    "remote_kill": {
        "slow_cancel",
        "signal_ignored",
        "wrote_outside",
        "cancel_lost_work",
        "stale_remote",
        "unreadable_state",
        "generation_decreased",
        "task_redone",
        "files_missing",
    },
}


@pytest.mark.parametrize("name", sorted(SELF_TESTS))
def test_self_test_catches_every_injected_fault(name: str, tmp_path: Path) -> None:
    code, data, output = run_campaign(name, "--self-test", out=tmp_path)
    assert code == 1, output
    # one fault a case, or more (remote_kill injects several into each of its trials)
    assert data["figures"]["faults injected"] >= data["cases"] > 0, output
    assert data["figures"].get("faults missed", 0) == 0, output
    missing = SELF_TESTS[name] - set(data["violations"])
    assert not missing, f"not reported: {missing}\n{output[-3000:]}"

"""The chaos campaigns of ``bench/chaos/`` at their CI size, as real subprocesses.

Each campaign runs once per test session at its ``--quick`` size with a fresh seed (printed
on failure; rerun with ``--seed``), shared by the tests that read its results, and once with
``--self-test``, which injects every fault its checker looks for and must exit 1 naming each.

Violations that come from defects of issue 12 being fixed on branch ``defects`` are checked
twice: a test that fails on any *other* violation kind, and a strict xfail that fails until
they are gone (flip it once the fix is merged).
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import assert_one_line_error, cairn, make_repo, state_root

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHAOS = ROOT / "bench" / "chaos"
TIMEOUT = 1200
NICE = 5

# violation kinds a known defect of issue 12 produces today
KNOWN = {
    "kill_writes": {
        "leftover_temp": "defect 9",  # temp files of killed writers are never removed
        "out_of_step": "defect 11",  # summary (or review, evaluation) ahead of the journal
        "journal_bad_line": "defect 10",  # a torn journal line kept forever
    },
    "kill_resume": {
        "resume_refused": "defect 8",  # a zombie cairn counts as a live owner
        "dead_agent_reported_stopped": "defect 8",  # a zombie agent counts as alive
    },
}


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


# A defect lease_race found that issue 12 does not list: a loser that tries the lease while the
# winner holds the lock but has not yet recorded itself in it says "already being run by
# another cairn process" instead of naming the owner (about one round in ten, under load).
NAMES_NOBODY = "is already being run by another cairn process"


def test_quick_lease_race_finds_nothing_else(tmp_path_factory: pytest.TempPathFactory) -> None:
    code, data, output = quick("lease_race", tmp_path_factory)
    assert code in (0, 1) and data, output
    others = {k: n for k, n in data["violations"].items() if k != "loser_message"}
    assert others == {}, explain(data, output)
    unnamed = data["examples"].get("loser_message", [])
    assert len(unnamed) == data["violations"].get("loser_message", 0), explain(data, output)
    assert all(NAMES_NOBODY in message for message in unnamed), explain(data, output)
    assert data["figures"]["rounds"] == data["cases"]  # every round ran


@pytest.mark.xfail(
    strict=True,
    reason="new defect: a loser racing the winner before it records itself names nobody",
)
def test_a_loser_names_a_lease_holder_that_has_not_recorded_itself(tmp_path: Path) -> None:
    """The instant lease_race hits now and then, held open: a process holds the ticket's lease
    lock and has written no owner record yet (a winner between its flock and its record)."""
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
    assert f"pid {holder.pid} " in result.stderr, result.stderr


# A defect snapshot_fuzz found that issue 12 does not list: an untracked file over the size cap
# whose name is not valid UTF-8 makes every snapshot fail (exit 1, "internal error:
# PydanticSerializationError … surrogates not allowed" from the Cairn-Skipped-Path trailer), so
# nothing of the work tree is saved. About one random tree in twenty has one.
UNREPORTABLE_NAME = "surrogates not allowed"
UNREPORTABLE_NAME_SEED = "2390419887"  # a tree with such a file


def test_quick_snapshot_fuzz_finds_nothing_else(tmp_path_factory: pytest.TempPathFactory) -> None:
    code, data, output = quick("snapshot_fuzz", tmp_path_factory)
    assert code in (0, 1) and data, output
    others = {k: n for k, n in data["violations"].items() if k != "save_failed"}
    assert others == {}, explain(data, output)
    failures = data["examples"].get("save_failed", [])
    assert len(failures) == data["violations"].get("save_failed", 0), explain(data, output)
    assert all(UNREPORTABLE_NAME in failure for failure in failures), explain(data, output)
    assert data["figures"]["trees"] == data["cases"]


@pytest.mark.xfail(
    strict=True,
    reason="new defect: a snapshot fails when an over-cap untracked file has a non-UTF-8 name",
)
def test_snapshot_of_an_over_cap_file_with_a_non_utf8_name(tmp_path: Path) -> None:
    code, data, output = run_campaign(
        "snapshot_fuzz", "--replay", UNREPORTABLE_NAME_SEED, out=tmp_path
    )
    assert code == 0, explain(data, output)


@pytest.mark.parametrize("name", ["kill_writes", "kill_resume"])
def test_quick_campaign_finds_no_unknown_violation(
    name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    code, data, output = quick(name, tmp_path_factory)
    assert code in (0, 1) and data, output
    unknown = {k: n for k, n in data["violations"].items() if k not in KNOWN[name]}
    assert unknown == {}, explain(data, output)
    assert data["figures"][data["unit"]] == data["cases"], output


@pytest.mark.xfail(strict=True, reason="defects 9 and 11 (and 10), fixed on branch defects")
def test_quick_kill_writes_finds_nothing(tmp_path_factory: pytest.TempPathFactory) -> None:
    code, data, output = quick("kill_writes", tmp_path_factory)
    assert code == 0, explain(data, output)


@pytest.mark.xfail(strict=True, reason="defect 8 (zombies count as alive), fixed on branch defects")
def test_quick_kill_resume_finds_nothing(tmp_path_factory: pytest.TempPathFactory) -> None:
    code, data, output = quick("kill_resume", tmp_path_factory)
    assert code == 0, explain(data, output)


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
    "kill_resume": {"task_redone", "bytes_lost"},
    "lease_race": {"two_winners", "loser_message", "no_winner"},
    "snapshot_fuzz": {"restore_differs", "user_state_changed", "oversize_not_reported"},
}


@pytest.mark.parametrize("name", sorted(SELF_TESTS))
def test_self_test_catches_every_injected_fault(name: str, tmp_path: Path) -> None:
    code, data, output = run_campaign(name, "--self-test", out=tmp_path)
    assert code == 1, output
    assert data["figures"]["faults injected"] == data["cases"] > 0, output
    assert data["figures"].get("faults missed", 0) == 0, output
    missing = SELF_TESTS[name] - set(data["violations"])
    assert not missing, f"not reported: {missing}\n{output[-3000:]}"

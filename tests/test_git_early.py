"""The snapshot's status pass started early: ``cairn.git.early.Spawned`` (``os.posix_spawn``,
read like ``Started``), the hand-off from ``start_early`` to the save's ``start_status``, and
the command line starting it before it imports the save (real git, real processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cairn.errors import GitError, SaveTimeout
from cairn.git import Deadline, base_runner, scrubbed_env
from cairn.git import status as git_status
from cairn.git.command import argv
from cairn.git.early import Spawned
from cairn.wip.scan import parse_status
from helpers import write


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_spawned_reads_like_git_run(repo: Path) -> None:
    write(repo, "new.txt", "x\n")
    early = git_status.start_status(repo / "src")  # from a subdirectory: paths from the top
    assert isinstance(early, Spawned)
    result = early.result()
    same = base_runner(repo).run(git_status.STATUS_ARGS)
    assert (result.returncode, result.stdout) == (0, same.stdout)
    assert parse_status(result.stdout).untracked == ["new.txt"]


def test_spawned_reports_git_s_error(tmp_path: Path) -> None:
    failing = Spawned(
        argv(["rev-parse", "HEAD"]), ["rev-parse", "HEAD"], str(tmp_path), scrubbed_env()
    )
    with pytest.raises(GitError, match="not a git repository"):
        failing.result()
    again = Spawned(
        argv(["rev-parse", "HEAD"]), ["rev-parse", "HEAD"], str(tmp_path), scrubbed_env()
    )
    assert again.result(check=False).returncode == 128


def test_a_deadline_kills_the_process_and_raises(repo: Path) -> None:
    sleeper = Spawned(
        ["git", "-c", "alias.nap=!sleep 30", "nap"], ["nap"], str(repo), scrubbed_env()
    )
    started = time.monotonic()
    with pytest.raises(SaveTimeout, match="`git nap` did not finish"):
        sleeper.result(deadline=Deadline(0.3))
    assert time.monotonic() - started < 5
    assert gone(sleeper.pid)


def test_abandon_stops_the_whole_session(repo: Path) -> None:
    sleeper = Spawned(
        ["git", "-c", "alias.nap=!sleep 30", "nap"], ["nap"], str(repo), scrubbed_env()
    )
    time.sleep(0.2)
    sleeper.abandon()
    assert gone(sleeper.pid) and sleeper.returncode is not None
    sleeper.abandon()  # twice is fine


def test_start_early_hands_its_process_to_the_save(repo: Path) -> None:
    git_status.start_early(str(repo / "src" / ".."))
    taken = git_status.start_status(repo)
    assert taken is not None and git_status.start_status(repo) is not taken  # taken once
    taken.result()
    assert git_status.take_discovery(repo) is not None and git_status.take_discovery(repo) is None
    git_status.start_early(str(repo))
    left = list(git_status._early.values())
    assert sorted(kind for kind, _ in git_status._early) == ["discovery", "status"]
    git_status.abandon_early()
    assert not git_status._early and all(gone(p.pid) for p in left)
    assert git_status.start_status(repo / "missing") is None


SPY = """
import sys
from cairn.git import status
real = status.start_early
def spy(workspace):
    heavy = [m for m in ("subprocess", "pathlib", "typing", "cairn.wip", "cairn.cli.output")
             if m in sys.modules]
    sys.stderr.write(f"early {workspace} before {heavy}\\n")
    real(workspace)
status.start_early = spy
from cairn.cli.main import main
sys.argv = ["cairn", *sys.argv[1:]]
main()
"""


def test_the_command_line_starts_git_status_before_it_imports_the_save(repo: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SPY, "wip", "save", "-C", str(repo), "--ticket", "T-1"],
        capture_output=True,
        text=True,
        env={**os.environ, "CAIRN_FAST": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert f"early {repo} before []" in done.stderr
    assert "snapshot" in done.stdout or "nothing to save" in done.stdout


def test_a_line_the_fast_path_hands_to_typer_stops_the_early_git(repo: Path) -> None:
    from cairn.cli import fast

    started: list[Spawned] = []
    real = git_status.start_status

    def keep(workspace: Path | str) -> Spawned | None:
        found = real(workspace)
        if found is not None:
            started.append(found)
        return found

    git_status.start_status = keep
    try:
        assert fast.dispatch(["wip", "save", "-C", str(repo), "--bogus"]) is None
    finally:
        git_status.start_status = real
    (early,) = started
    assert not git_status._early and early.returncode is not None  # stopped and reaped

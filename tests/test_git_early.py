"""The snapshot's status pass and discovery started early: ``cairn.git.status.start_early``
returns them as one ``Early``, the command line passes it to the save, and the save (or, when
the command does not run, the command line) stops what it did not use (real git, real
processes)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from cairn.errors import GitError, SaveTimeout
from cairn.git import Deadline, Repo, base_runner
from cairn.git import status as git_status
from cairn.git.process import Started
from cairn.wip.scan import parse_status
from helpers import write


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def nap(repo: Path) -> Started:
    return base_runner(repo).with_config("alias.nap=!sleep 30").start(["nap"])


def test_a_started_status_reads_like_git_run(repo: Path) -> None:
    write(repo, "new.txt", "x\n")
    early = git_status.start(repo / "src", git_status.STATUS_ARGS)  # paths from the top
    assert early is not None
    result = early.result()
    same = base_runner(repo).run(git_status.STATUS_ARGS)
    assert (result.returncode, result.stdout) == (0, same.stdout)
    assert parse_status(result.stdout).untracked == ["new.txt"]
    assert early.result() is result  # read once, kept


def test_a_started_command_reports_git_s_error(tmp_path: Path) -> None:
    failing = git_status.start(tmp_path, ["rev-parse", "HEAD"])
    assert failing is not None
    with pytest.raises(GitError, match="not a git repository"):
        failing.result()
    assert failing.result(check=False).returncode == 128
    assert git_status.start(tmp_path / "missing", ["status"]) is None


def test_a_deadline_kills_the_process_and_raises(repo: Path) -> None:
    sleeper = nap(repo)
    started = time.monotonic()
    with pytest.raises(SaveTimeout, match="`git nap` did not finish"):
        sleeper.result(deadline=Deadline(0.3))
    assert time.monotonic() - started < 5
    assert gone(sleeper.proc.pid)


def test_abandon_stops_the_whole_session(repo: Path) -> None:
    sleeper = nap(repo)
    time.sleep(0.2)
    sleeper.abandon()
    assert gone(sleeper.proc.pid) and sleeper.proc.returncode is not None
    sleeper.abandon()  # twice is fine


def test_start_early_starts_both_and_abandon_stops_both(repo: Path) -> None:
    early = git_status.start_early(str(repo / "src" / ".."))
    assert early.status is not None and early.discovery is not None
    found = Repo.discover(repo, early.discovery)
    assert found.toplevel == repo.resolve()
    assert early.status.result().ok
    early.abandon()  # both read: nothing to stop
    other = git_status.start_early(str(repo))
    pids = [s.proc.pid for s in (other.status, other.discovery) if s is not None]
    other.abandon()
    assert len(pids) == 2 and all(gone(pid) for pid in pids)
    missing = git_status.start_early(str(repo / "missing"))
    assert missing.status is None and missing.discovery is None


SPY = """
import sys
from cairn.git import status
real = status.start_early
def spy(workspace):
    heavy = [m for m in ("pathlib", "typing", "cairn.wip", "cairn.cli.output")
             if m in sys.modules]
    sys.stderr.write(f"early {workspace} before {heavy}\\n")
    return real(workspace)
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
    )
    assert done.returncode == 0, done.stderr
    assert f"early {repo} before []" in done.stderr
    assert "snapshot" in done.stdout or "nothing to save" in done.stdout


def test_a_bad_command_line_stops_the_early_git(repo: Path) -> None:
    from cairn.cli.commands import COMMANDS
    from cairn.cli.main import run

    started: list[git_status.Early] = []
    real = git_status.start_early

    def keep(workspace: str) -> git_status.Early:
        found = real(workspace)
        started.append(found)
        return found

    git_status.start_early = keep
    try:
        line = ["-C", str(repo), "--bogus"]
        assert run(("wip", "save"), COMMANDS["wip", "save"], line, ["wip", "save", *line]) == 2
    finally:
        git_status.start_early = real
    (early,) = started
    for process in (early.status, early.discovery):
        assert process is not None and process.proc.returncode is not None  # stopped, reaped


def test_the_save_stops_an_early_start_for_another_work_tree(repo: Path, tmp_path: Path) -> None:
    from cairn import wip

    other = git_status.start_early(str(tmp_path))
    assert other.status is not None
    result = wip.save(repo, ticket="T-2", early=other)
    assert result.ref.endswith("T-2") and other.status.proc.returncode is not None

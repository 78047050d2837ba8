"""Output piped into ``head`` (issue 22): a command whose reader went away ends quietly, exit 0,
nothing on stderr. It said ``cairn: error: Broken pipe; check the permissions and free space``
(exit 1), or under ``--json`` showed a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import cairn, git, make_repo, scripted_project

SCRIPT = {
    "coder": [
        [{"cairn": ["task", "start", "1"]}, {"write": {"path": "a.txt", "content": "a\n"}}],
        [{"say": "task one is done"}, {"cairn": ["task", "done", "1"]}],
    ]
}


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository with a finished run of T-1 (transcripts for ``cairn logs``) and a
    snapshot: with the reader gone, even one line fails to be written."""
    root = tmp_path_factory.mktemp("pipe")
    repo, plan = scripted_project(root, SCRIPT, tasks=("One",))
    assert cairn("run", str(plan), "--ticket", "T-1", cwd=repo).returncode == 0
    (repo / "b.txt").write_text("b\n")
    saved = cairn("wip", "save", "--ticket", "T-1", cwd=repo)
    assert saved.returncode == 0, saved.stderr
    return repo


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """700 tickets with a snapshot: ``cairn wip list`` prints more than a pipe holds, line by
    line, so ``head`` closes it while cairn still writes."""
    repo = make_repo(tmp_path_factory.mktemp("crowded") / "repo")
    (repo / "b.txt").write_text("b\n")
    assert cairn("wip", "save", "--ticket", "W-0", cwd=repo).returncode == 0
    commit = git(repo, "rev-parse", "refs/cairn/wip/W-0").strip()
    lines = "".join(f"create refs/cairn/wip/W-{n:04d} {commit}\n" for n in range(1, 700))
    subprocess.run(["git", "update-ref", "--stdin"], cwd=repo, input=lines.encode(), check=True)
    return repo


COMMANDS = [
    ["status"],
    ["status", "--json"],
    ["wip", "list", "--limit", "0"],
    ["wip", "list", "--limit", "0", "--json"],
    ["catchup", "T-1"],
    ["catchup", "T-1", "--json"],
    ["logs", "T-1"],
    ["logs", "T-1", "--json"],
    ["wip", "show", "T-1"],
]


def closed_reader(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """Run ``cairn args`` with stdout a pipe whose reader is already gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "cairn", *args],
            cwd=cwd,
            stdout=write,
            stderr=subprocess.PIPE,
            check=False,
            timeout=120,
        )
    finally:
        os.close(write)


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_reader_that_went_away_ends_the_command_quietly(busy: Path, args: list[str]) -> None:
    done = closed_reader(args, busy)
    assert (done.returncode, done.stderr.decode()) == (0, "")


def test_head_takes_the_first_lines_and_nothing_is_said(crowded: Path) -> None:
    for args in ("wip list --limit 0", "status", "status --json"):
        line = f"{sys.executable} -m cairn {args}"
        done = subprocess.run(
            ["bash", "-c", f"set -o pipefail; {line} | head -n 2"],
            cwd=crowded,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert (done.returncode, done.stderr) == (0, ""), args
        assert len(done.stdout.splitlines()) == 2


def test_a_real_error_is_still_reported_with_the_reader_gone(busy: Path) -> None:
    done = closed_reader(["catchup", "../x"], busy)
    assert done.returncode == 2 and done.stderr.decode().startswith("cairn: error: ")

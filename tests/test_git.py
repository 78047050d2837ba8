"""The git layer: scrubbed environment, error lines, long-running sessions and their deadline."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cairn.errors import GitError, SaveTimeout
from cairn.git import Deadline, Repo, scrubbed_env, telling_line
from helpers import write


def test_scrubbed_env_drops_inherited_git_variables() -> None:
    env = scrubbed_env(
        {"GIT_DIR": "/x", "GIT_INDEX_FILE": "/y", "GIT_SSH_COMMAND": "ssh -i k", "PATH": "/bin"}
    )
    assert "GIT_DIR" not in env and "GIT_INDEX_FILE" not in env
    assert env["GIT_SSH_COMMAND"] == "ssh -i k" and env["PATH"] == "/bin"
    assert env["GIT_OPTIONAL_LOCKS"] == "0" and env["GIT_TERMINAL_PROMPT"] == "0"
    assert env["GIT_COMMITTER_EMAIL"] == "cairn@localhost"


def test_telling_line_prefers_the_fatal_line() -> None:
    text = "fatal: 'x' does not appear to be a git repository\nfatal: Could not read\nhint: try"
    assert telling_line(text) == "fatal: 'x' does not appear to be a git repository"
    assert telling_line("hint: only hints\nplain") == "plain"


def test_session_answers_requests_in_order(repo: Path) -> None:
    found = Repo.discover(repo)
    head = found.git.out(["rev-parse", "HEAD"])
    with found.git.session(["cat-file", "--batch-check"]) as session:
        for _ in range(3):
            session.send(b"HEAD\n")
            assert session.readline().decode().startswith(f"{head} commit")


def test_session_is_killed_at_its_deadline(repo: Path) -> None:
    found = Repo.discover(repo)
    with found.git.session(["cat-file", "--batch"], Deadline(0.2)) as session:
        time.sleep(0.5)
        with pytest.raises(SaveTimeout):
            session.send(b"HEAD\n")
            session.readline()


def test_session_reports_git_errors(repo: Path) -> None:
    found = Repo.discover(repo)
    with found.git.session(["mktree", "--batch"]) as session, pytest.raises(GitError) as caught:
        session.send(b"garbage line\n\n")
        session.readline()
    assert "mktree" in str(caught.value)


def test_head_reads_at_most_its_limit_and_stops_the_command(repo: Path) -> None:
    """``Started.head``: the dashboard's diffs are read this way, never whole (issue 22)."""
    from cairn.git import Git

    write(repo, "big.txt", "line\n" * 100_000)  # 500 KB in the work tree, not committed
    git_ = Git(repo)
    started = git_.start(["diff", "--no-index", "--", "/dev/null", "big.txt"])
    result, cut = started.head(1024)
    assert cut and len(result.stdout) == 1024 and result.stdout.startswith(b"diff --git")
    assert started.proc.returncode is not None  # stopped, not left running
    whole, cut = git_.start(["rev-parse", "HEAD"]).head(1024)
    assert not cut and whole.ok and len(whole.stdout.strip()) == 40
    failed, cut = git_.start(["rev-parse", "--verify", "nope"]).head(1024)
    assert not cut and not failed.ok and failed.stdout == b""
